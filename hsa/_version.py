"""hsa's version, in a module of its own (like ``hsa.errors``, in no layer): the jobs that record
it import it from here, not from ``hsa`` itself, whose type-checking imports reach every area."""

__version__ = "0.1.0"


def made_by() -> dict[str, str]:
    """What a job records of the hsa that ran it: ``{"hsa": "0.1.0"}``, the top of every
    manifest (``hsa teach``, ``hsa augment``, ``hsa build``), a build's identity too."""
    return {"hsa": __version__}
