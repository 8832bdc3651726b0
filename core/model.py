"""The one base of the typed records (run state, knowledge base): strict on creation and on update.

Why: pydantic's ``model_copy(update=...)`` skips validation, so a misspelt field
(``verdcit_reason``) or an impossible value (``verdict="wins"``) was accepted silently and
reached a checkpoint and the knowledge base.  Here an update is validated like a new record:
unknown fields and bad values fail where the update is made.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """``extra="forbid"`` and a validating :meth:`model_copy`."""

    model_config = ConfigDict(extra="forbid")

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with ``update`` applied, validated as if the record were built anew.

        Nested records already built are taken as they are (they were validated when made);
        ``deep`` copies the result, as pydantic's own ``model_copy`` does."""
        if not update:
            return super().model_copy(deep=deep)
        cls = type(self)
        unknown = sorted(set(update) - set(cls.model_fields))
        if unknown:
            raise ValueError(f"{cls.__name__} has no field {', '.join(map(repr, unknown))}")
        data = {name: getattr(self, name) for name in cls.model_fields}
        data.update(update)
        fresh = cls.model_validate(data)
        object.__setattr__(fresh, "__pydantic_fields_set__", self.model_fields_set | set(update))
        return copy.deepcopy(fresh) if deep else fresh
