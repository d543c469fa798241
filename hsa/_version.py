"""hsa's version, in a module of its own (like ``hsa.errors``, in no layer): the jobs that record
it import it from here, not from ``hsa`` itself, whose type-checking imports reach every area."""

__version__ = "0.1.0"
