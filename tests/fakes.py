"""Stand-ins the tests of several layers share."""

from hsa.errors import TeacherError
from hsa.teachers.backends.base import Backend
from hsa.teachers.request import ChatRequest, ChatResponse


class Unloadable(Backend):
    """A backend whose model cannot be loaded: ``start`` fails, nothing is ever asked."""

    name = "unloadable"

    async def start(self) -> None:
        raise TeacherError("no model folder here", file="/models/missing")

    async def chat(self, request: ChatRequest) -> ChatResponse:
        raise AssertionError("never asked")
