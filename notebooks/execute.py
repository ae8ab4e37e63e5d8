#!/usr/bin/env python3
"""Execute every notebook under notebooks/ headless, failing on any cell error.

Run from the repository root with the venv's python (`make notebooks` does):

    .venv/bin/python notebooks/execute.py [--out target/notebooks] [NOTEBOOK ...]

Each notebook runs with the repository root as its working directory; the executed copy
(with outputs) and the images the notebook saves land in --out (exported to the kernels
as INA3D_NB_OUT), never in git. Inputs are chosen by the notebooks' own environment
variables (INA3D_RESULTS, INA3D_FLOWS / INA3D_REPLAY_DIR / INA3D_NS3_DIR, INA3D_SWEEP),
which pass through to the kernel. Exit status: 0 when every notebook ran cleanly, 1
otherwise (each failure printed with the failing cell's traceback).
"""

import argparse
import os
import pathlib
import sys
import time

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def main() -> int:
    root = pathlib.Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="target/notebooks", help="where executed notebooks and images go")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    ap.add_argument("notebooks", nargs="*", type=pathlib.Path)
    args = ap.parse_args()

    out = args.out if os.path.isabs(args.out) else root / args.out
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ["INA3D_NB_OUT"] = str(out)

    notebooks = args.notebooks or sorted((root / "notebooks").glob("*.ipynb"))
    if not notebooks:
        print("no notebooks found", file=sys.stderr)
        return 1
    failed = []
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(
            nb,
            timeout=args.timeout,
            kernel_name="python3",
            allow_errors=False,
            resources={"metadata": {"path": str(root)}},
        )
        t0 = time.monotonic()
        try:
            client.execute()
            print(f"ok      {path.name} ({time.monotonic() - t0:.1f} s)")
        except CellExecutionError as e:
            failed.append(path.name)
            print(f"FAILED  {path.name}\n{e}", file=sys.stderr)
        except Exception as e:  # kernel died, timeout, unreadable notebook
            failed.append(path.name)
            print(f"FAILED  {path.name}: {type(e).__name__}: {e}", file=sys.stderr)
        finally:
            executed = out / path.name
            tmp = executed.with_suffix(".ipynb.tmp")
            nbformat.write(nb, tmp)
            tmp.replace(executed)
    if failed:
        print(f"{len(failed)} of {len(notebooks)} notebook(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"all {len(notebooks)} notebooks ran; outputs in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
