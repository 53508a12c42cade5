"""Griffe extension for the API reference: in a class with its own `__init__`, a field
shows its type, not the expression that `__init__` assigns to it
(`policy_head = orthogonal_linear(...)` is the implementation, not documentation).
Fields of classes without one (`Config`'s `num_envs: int = 64`) keep their defaults."""

import griffe


class InitAssignmentValues(griffe.Extension):
    def on_class_members(self, *, cls: griffe.Class, **kwargs) -> None:
        del kwargs
        if "__init__" not in cls.members:
            return
        for member in cls.members.values():
            if not member.is_alias and member.is_attribute:
                member.value = None
