"""Build the paper PDF: Tectonic when installed, otherwise latexmk -pdf."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from kernbench.errors import KernbenchError

INSTALL_HINT = ("install TeX Live (Debian: apt-get install latexmk texlive-latex-base "
                "texlive-latex-recommended texlive-latex-extra lmodern) or Tectonic")


def choose_engine(preference: str = "auto") -> str:
    if preference not in ("auto", "tectonic", "latexmk"):
        raise KernbenchError(f"report engine must be auto, tectonic or latexmk, got {preference!r}")
    if preference in ("auto", "tectonic") and shutil.which("tectonic"):
        return "tectonic"
    if preference == "tectonic":
        raise KernbenchError(f"tectonic is not on PATH; {INSTALL_HINT}")
    if shutil.which("latexmk") and shutil.which("pdflatex"):
        return "latexmk"
    raise KernbenchError(f"no LaTeX engine found; {INSTALL_HINT}")


def build_pdf(tex: str | Path, out_pdf: str | Path, preference: str = "auto",
              log: str | Path | None = None) -> Path:
    """Compile ``tex`` (run from its folder) and copy the result to ``out_pdf``."""
    tex = Path(tex).resolve()
    out_pdf = Path(out_pdf).resolve()
    build_dir = out_pdf.parent
    build_dir.mkdir(parents=True, exist_ok=True)
    engine = choose_engine(preference)
    if engine == "tectonic":
        cmd = ["tectonic", "--keep-logs", "--outdir", str(build_dir), tex.name]
    else:
        cmd = ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", "-file-line-error",
               f"-outdir={build_dir}", tex.name]
    env = dict(os.environ, SOURCE_DATE_EPOCH="0", FORCE_SOURCE_DATE="1")
    proc = subprocess.run(cmd, cwd=tex.parent, env=env, capture_output=True, text=True, check=False)
    if log:
        Path(log).write_text(proc.stdout + proc.stderr)
    produced = build_dir / (tex.stem + ".pdf")
    if proc.returncode != 0 or not produced.exists():
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        raise KernbenchError(f"{engine} failed on {tex.name} (exit {proc.returncode}):\n{tail}")
    if produced != out_pdf:
        shutil.copyfile(produced, out_pdf)
    return out_pdf
