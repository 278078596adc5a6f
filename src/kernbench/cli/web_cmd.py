"""``kernbench web``: serve the results site (results/site/) on 127.0.0.1 only."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("web", help="serve results/site/ on http://127.0.0.1:PORT/")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000; 0: any free)")
    p.add_argument("--dir", default="results/site", help="the site directory")
    p.set_defaults(func=run)


def serve(directory: Path, port: int):
    """A threading HTTP server for ``directory`` bound to the loopback interface."""
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    from kernbench.errors import UsageError

    if not (directory / "index.html").is_file():
        raise UsageError(f"{directory}/index.html: no site yet; build it with "
                         f"`snakemake --cores 2 {directory}/index.html`")
    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port}: must be in 0..65535")

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:  # one line per request is noise here
            pass

    handler = functools.partial(Quiet, directory=str(directory))
    try:
        return ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as exc:
        raise UsageError(f"--port {port}: cannot listen on 127.0.0.1 ({exc.strerror})") from None


def run(args) -> int:
    server = serve(Path(args.dir), args.port)
    print(f"serving {args.dir} at http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
