"""An enum whose members can be added at run time (``Dispatch.register("MY_MODE")``)."""

from __future__ import annotations


def _member_by_name(cls: type, name: str):
    return cls.from_name(name) or cls.register(name)


class _DynamicEnumMeta(type):
    def __iter__(cls):
        return iter(cls._registry.values())

    def __contains__(cls, item: object) -> bool:
        if isinstance(item, str):
            return item in cls._registry
        return any(item is member for member in cls._registry.values())

    def __getitem__(cls, name: str):
        try:
            return cls._registry[name]
        except KeyError:
            raise KeyError(f"{cls.__name__} has no member {name!r}; registered: {sorted(cls._registry)}") from None


class DynamicEnum(metaclass=_DynamicEnumMeta):
    """Base for enums extended with :meth:`register`; each subclass declares its own ``_registry = {}``."""

    _registry: dict[str, DynamicEnum] = {}
    _next_value: int = 0

    def __init__(self, name: str, value: int) -> None:
        self.name = name
        self.value = value

    def __repr__(self) -> str:
        return f"<{type(self).__name__}.{self.name}: {self.value}>"

    def __reduce__(self):
        # Members are singletons: unpickling finds the member by name; a process that never ran the registration
        # (a worker receiving a class pickled by value) registers the name itself.
        return _member_by_name, (type(self), self.name)

    @classmethod
    def register(cls, name: str) -> DynamicEnum:
        """Add a member called ``name``; names are unique."""
        if name in cls._registry:
            raise ValueError(f"{cls.__name__}.{name} is already registered")
        member = cls(name, cls._next_value)
        cls._registry[name] = member
        cls._next_value += 1
        setattr(cls, name, member)
        return member

    @classmethod
    def remove(cls, name: str) -> DynamicEnum:
        """Drop the member called ``name`` (it must exist)."""
        member = cls[name]
        del cls._registry[name]
        delattr(cls, name)
        return member

    @classmethod
    def from_name(cls, name: str) -> DynamicEnum | None:
        """The member called ``name``, or ``None``."""
        return cls._registry.get(name)
