"""Hardware what-if settings: topology parameters scaled by factors (config ``whatif``).

A parameter names one or more dotted topology keys (the HBM slice bandwidth is
the pseudo-channels' bandwidth and the links sized to it); each factor makes one
setting, ``<parameter>-x<factor>``, whose overrides are the keys' values in the
job's own topology times the factor. The overrides are absolute numbers, so a
rerun's slice, and with it the derived topology's hash, changes only when the
base value, the factor or the keys change. Every derived topology is loaded
once here, at config time: a key the topology does not have, a value that is
not a number, an integer key the factor does not keep integral, or a derived
topology its own checks refuse is one line naming the config key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernbench.errors import ConfigError
from kernbench.topology.spec import load_spec, value_at


@dataclass(frozen=True)
class Setting:
    name: str  # <parameter>-x<factor>, the rerun's variant suffix
    parameter: str
    factor: float
    overrides: dict


def setting_name(parameter: str, factor: float) -> str:
    return f"{parameter}-x{factor:g}"


def _scaled(base, factor: float, where: str, source: str, path: str):
    if isinstance(base, bool) or not isinstance(base, int | float):
        raise ConfigError(source, where, f"{path} holds {base!r} there, not a number to scale")
    value = base * factor
    if isinstance(base, int):
        if not float(value).is_integer():
            raise ConfigError(source, where, f"{base} x {factor:g} = {value:g} in {path}, "
                                             f"but the key takes an integer")
        return int(value)
    return float(value)


def resolve(block: dict, names: list[str], topology: str | Path, source: str
            ) -> list[Setting]:
    """The settings of parameters ``names`` on the topology file ``topology``."""
    out = []
    for name in names:
        param = block["parameters"][name]
        base = {}
        for j, key in enumerate(param["keys"]):
            where = f"whatif.parameters.{name}.keys[{j}]"
            try:
                base[key] = value_at(topology, key)
            except ConfigError as exc:
                raise ConfigError(source, where, f"{key!r} is not a key of {topology} "
                                                 f"({exc.detail})") from None
        for factor in param.get("factors", block["factors"]):
            overrides = {key: _scaled(value, factor, f"whatif.parameters.{name}.keys[{j}]",
                                      source, str(topology))
                         for j, (key, value) in enumerate(base.items())}
            try:
                load_spec(topology, overrides)
            except ConfigError as exc:
                raise ConfigError(source, f"whatif.parameters.{name}", f"x{factor:g} gives "
                                  f"a topology its checks refuse: {exc}") from None
            out.append(Setting(setting_name(name, factor), name, float(factor), overrides))
    return out
