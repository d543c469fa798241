"""Hand-written BFCL v4 entries of the categories shared/external lacks, in the real files' shape.

Each entry is a trimmed copy of a real one (BFCL commit 6ea5797): ``simple_java_1``/``_22``,
``simple_javascript_0``/``_23`` (its nested ``"type": ""``), ``web_search_0``, and
``memory_0-customer-0`` with two of the customer scenario's prerequisite conversations, and
``multi_turn_miss_func_3``.
``write_v4_folder`` lays them out as a BFCL data folder, with the real API docs from
shared/external (the memory and web_search docs are there).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any


def _user(text: str) -> list[list[dict[str, str]]]:
    return [[{"role": "user", "content": text}]]


SIMPLE_JAVA = [
    {
        "id": "simple_java_1",
        "question": _user(
            "Help me generate SQL completion proposals for a table named 'Customers' in a "
            "database, considering that I prefer using short names and the additional "
            "parameters include a limit of '50' and a schema filter set to 'public'?"
        ),
        "function": [
            {
                "name": "SQLCompletionAnalyzer.makeProposalsFromObject",
                "description": "Generates SQL completion proposals based on the given database "
                "object, name preference, and additional parameters.",
                "parameters": {
                    "type": "dict",
                    "properties": {
                        "object": {
                            "type": "any",
                            "description": "The database object for which to generate proposals.",
                        },
                        "useShortName": {
                            "type": "boolean",
                            "description": "Indicates whether to use short names.",
                        },
                        "params": {
                            "type": "HashMap",
                            "description": "A map of additional parameters.",
                        },
                    },
                    "required": ["object", "useShortName", "params"],
                },
            }
        ],
    },
    {
        "id": "simple_java_22",
        "question": _user(
            "Help me update the new status to 2 for a list of product IDs [101, 202, 303] in "
            "the product management system?"
        ),
        "function": [
            {
                "name": "PmsProductServiceImpl.updateNewStatus",
                "description": "Updates the new status for a list of product IDs.",
                "parameters": {
                    "type": "dict",
                    "properties": {
                        "ids": {
                            "type": "ArrayList",
                            "description": "A list of product IDs. Product ID is Long type",
                            "items": {"type": "long"},
                        },
                        "newStatus": {"type": "integer", "description": "The new status."},
                    },
                    "required": ["ids", "newStatus"],
                },
            }
        ],
    },
]
SIMPLE_JAVA_ANSWERS = [
    {
        "id": "simple_java_1",
        "ground_truth": [
            {
                "SQLCompletionAnalyzer.makeProposalsFromObject": {
                    "object": ["Customers"],
                    "useShortName": [True],
                    "params": [{"limit": [50], "schemaFilter": ["public"]}],
                }
            }
        ],
    },
    {
        "id": "simple_java_22",
        "ground_truth": [
            {"PmsProductServiceImpl.updateNewStatus": {"ids": [[101, 202, 303]], "newStatus": [2]}}
        ],
    },
]

SIMPLE_JAVASCRIPT = [
    {
        "id": "simple_javascript_0",
        "question": _user(
            "Help me validate user input in a form field with the ID 'userInputField' after "
            "the user has finished typing?"
        ),
        "function": [
            {
                "name": "validateUserInput",
                "description": "This function is called after a user has finished typing in a "
                "form field, to validate the input provided.",
                "parameters": {
                    "type": "dict",
                    "properties": {
                        "inputField": {
                            "type": "String",
                            "description": "The form field whose input needs to be validated.",
                        },
                        "isComplete": {
                            "type": "Boolean",
                            "description": "Indicates if the user has finished typing.",
                        },
                    },
                    "required": ["inputField", "isComplete"],
                },
            }
        ],
    },
    {
        "id": "simple_javascript_23",
        "question": _user(
            "Help me generate an authorization token for a user with username 'johndoe', valid "
            "for '3600' seconds, issued by 'myapp.net', with a role of 'admin', and encoded with "
            "'HS256' algorithm?"
        ),
        "function": [
            {
                "name": "createAuthToken",
                "description": "This function generates an authorization token.",
                "parameters": {
                    "type": "dict",
                    "properties": {
                        "username": {"type": "String", "description": "The username."},
                        "validity": {
                            "type": "integer",
                            "description": "The number of seconds the token remains valid.",
                        },
                        "options": {
                            "type": "dict",
                            "description": "options dictionary, default empty dictionary",
                            "properties": {
                                "issuer": {
                                    "type": "",
                                    "description": "The entity that issued the token.",
                                },
                                "role": {"type": "String", "description": "The role."},
                                "algorithm": {"type": "String", "description": "The algorithm."},
                            },
                        },
                    },
                    "required": ["username", "options"],
                },
            }
        ],
    },
]
SIMPLE_JAVASCRIPT_ANSWERS = [
    {
        "id": "simple_javascript_0",
        "ground_truth": [
            {"validateUserInput": {"inputField": ["userInputField"], "isComplete": [True]}}
        ],
    },
    {
        "id": "simple_javascript_23",
        "ground_truth": [
            {
                "createAuthToken": {
                    "username": ["johndoe"],
                    "validity": [3600],
                    "options": [
                        {"issuer": ["myapp.net"], "role": ["admin"], "algorithm": ["HS256"]}
                    ],
                }
            }
        ],
    },
]

WEB_SEARCH = [
    {
        "id": "web_search_0",
        "question": _user(
            "Some countries are known for producing luxury goods, including the world's most "
            "expensive tea. In April 2025, who is the richest billionaire (according to Forbes) "
            "from the country that produces the most expensive tea?"
        ),
        "involved_classes": ["WebSearchAPI"],
    }
]
WEB_SEARCH_ANSWERS = [
    {
        "id": "web_search_0",
        "ground_truth": ["Zhang Yiming"],
        "source": [{"subquestion": "Most expensive tea in the world", "answer": "DaHong Pao"}],
        "num_hops": 3,
    }
]

MEMORY = [
    {
        "id": "memory_0-customer-0",
        "question": _user("What is my first name?"),
        "involved_classes": ["MemoryAPI"],
        "scenario": "customer",
    }
]
MEMORY_ANSWERS = [
    {
        "id": "memory_0-customer-0",
        "ground_truth": ["Michael"],
        "source": "My name is Michael, and this is my first time interacting with your company...",
    }
]
MEMORY_CUSTOMER_PREREQ = [
    {
        "id": "memory_prereq_0-customer-0",
        "topic": "First-Time Inquiry About a Product",
        "question": [
            [{"role": "user", "content": "Hey there! My name is Michael."}],
            [{"role": "user", "content": "I'm 35 years old and live in Seattle."}],
        ],
        "involved_classes": ["MemoryAPI"],
        "scenario": "customer",
    },
    {
        "id": "memory_prereq_1-customer-1",
        "topic": "Placing the First Order",
        "question": [[{"role": "user", "content": "I'm ready to order an espresso machine."}]],
        "involved_classes": ["MemoryAPI"],
        "scenario": "customer",
    },
]

# multi_turn_miss_func_3 without its initial_config: its second turn has no message and
# reveals the held-out functions ``find`` and ``ls``, whose call is that turn's answer.
MULTI_TURN_MISS_FUNC = [
    {
        "id": "multi_turn_miss_func_3",
        "question": [
            _user(
                "As part of my latest photography project, I need to gather files that have "
                "'test' in their name. Could you help me locate those?"
            )[0],
            [],
            _user(
                "After identifying them, the next step is to ensure the images and text files "
                "are safely copied into a 'backup_tests' folder right within the same "
                "directory. Could that be arranged?"
            )[0],
        ],
        "path": ["GorillaFileSystem.cd", "GorillaFileSystem.find", "GorillaFileSystem.cp"],
        "involved_classes": ["GorillaFileSystem"],
        "missed_function": {"1": ["find", "ls"]},
        "excluded_function": ["mv"],
    }
]
MULTI_TURN_MISS_FUNC_ANSWERS = [
    {
        "id": "multi_turn_miss_func_3",
        "ground_truth": [
            [],
            ["find(path='.',name='test')"],
            [
                "cd(folder='projects')",
                "cd(folder='photography')",
                "cp(source='test_image1.jpg',destination='backup_tests')",
                "cp(source='test_document.txt',destination='backup_tests')",
            ],
        ],
    }
]

CATEGORIES: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {
    "simple_java": (SIMPLE_JAVA, SIMPLE_JAVA_ANSWERS),
    "simple_javascript": (SIMPLE_JAVASCRIPT, SIMPLE_JAVASCRIPT_ANSWERS),
    "web_search": (WEB_SEARCH, WEB_SEARCH_ANSWERS),
    "memory": (MEMORY, MEMORY_ANSWERS),
    "multi_turn_miss_func": (MULTI_TURN_MISS_FUNC, MULTI_TURN_MISS_FUNC_ANSWERS),
}


def write_lines(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")


def write_v4_folder(root: Path, external: Path, *, prereq: bool = True) -> Path:
    """A BFCL data folder holding the four categories above, their answers and the API docs."""
    shutil.copytree(external / "bfcl" / "multi_turn_func_doc", root / "multi_turn_func_doc")
    for category, (entries, answers) in CATEGORIES.items():
        write_lines(root / f"BFCL_v4_{category}.json", entries)
        write_lines(root / "possible_answer" / f"BFCL_v4_{category}.json", answers)
    if prereq:
        write_lines(
            root / "memory_prereq_conversation" / "memory_customer.json", MEMORY_CUSTOMER_PREREQ
        )
    return root
