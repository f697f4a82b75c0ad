"""The in-job bootstrap as the string a CustomJob's container command carries.

The program itself is the ordinary module ``_bootstrap_main`` (standard library only, so it runs in any
image); its source text ships as package data with the ``.py`` file and is passed as ``python -c``.
"""

from __future__ import annotations

from importlib import resources

BOOTSTRAP_MODULE = "_bootstrap_main.py"

BOOTSTRAP_CODE: str = (
    resources.files("trainworks.submit").joinpath(BOOTSTRAP_MODULE).read_text(encoding="utf-8")
)
