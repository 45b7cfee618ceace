"""Studio over an index saved by ``ragtiller ingest`` in an earlier process (issue 44, item 1).

The server's blocking-call guard refuses a blocking call on its event loop. A node that makes
one (tqdm's multiprocessing lock, created on first use, writes to a pipe) fails the turn, and on
an index the server did not build itself nothing has made that lock earlier. So the test ingests
in a separate process, as a user does, then serves the saved index with ``langgraph dev``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph_sdk import get_client

from ragtiller import RunManifest
from ragtiller.core.tiers import STAGES
from tests.test_studio import DevServer

PARAGRAPH = "A worker leases a job from the queue,\nand the lease of a job lasts {} seconds.\n\n"
DOCS = {
    "queue.md": "# Queue\n\n## Leases\n\n" + "".join(PARAGRAPH.format(n) for n in range(6)),
    "retries.md": "# Retries\n\n## Backoff\n\n"
    + "".join(PARAGRAPH.replace("lease", "retry").format(n) for n in range(6)),
}


@pytest.fixture
def saved_index_server(tmp_path: Path) -> Iterator[tuple[str, DevServer]]:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, "utf-8")
    index = tmp_path / "index"
    subprocess.run(
        [sys.executable, "-m", "ragtiller", "ingest", str(docs), "--index", str(index),
        ],  # the default embedder, as a user ingests
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    server = DevServer(tmp_path, env={"RAGTILLER_INDEX": str(index)})
    try:
        url = server.url(timeout_s=120)
        server.wait_ready(url, timeout_s=120)
        yield url, server
    finally:
        server.stop()


@pytest.mark.slow
async def test_every_turn_over_a_saved_index_answers_and_the_indexer_still_runs(
    saved_index_server: tuple[str, DevServer],
) -> None:
    url, server = saved_index_server
    async with get_client(url=url) as client:
        for question in ("how long is a job leased by a worker?", "how often is a job retried?"):
            thread = await client.threads.create()
            events, values = [], {}
            async for part in client.runs.stream(
                thread["thread_id"], "ragtiller", input={"query": question},
                stream_mode=["custom", "values"],
            ):  # fmt: skip
                assert part.event != "error", part.data
                if part.event == "custom":
                    events.append(part.data)
                elif part.event == "values":
                    values = part.data
            assert {e["step"] for e in events if e["status"] != "active"} == set(STAGES)
            manifest = RunManifest.model_validate(values["manifest"])
            assert manifest.degraded == []
            assert values["documents"], question
        # a failed turn used to leave tqdm's class lock held, and the indexer then hung on it
        thread = await client.threads.create()
        run = await client.runs.wait(
            thread["thread_id"], "ragtiller_indexer", input={"paths": []}, raise_error=False
        )
        assert run is not None
    server.stop()
    assert "BlockingError" not in "".join(server.log)
