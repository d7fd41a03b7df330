"""Small host-side agreements between worker processes, through JAX's coordination service.

Input pipelines whose workers read different streams must agree, before each step,
whether any worker still has data (TF all-reduces the same flag). Doing it with a
device collective from the prefetch thread could interleave with the training step's
collectives differently on each worker; the coordination service's key-value store
never touches the devices, and every wait is bounded.
"""
from __future__ import annotations

import itertools
from typing import Sequence

import jax

_GC_LAG = 1024  # a worker deletes its own key this many rounds after writing it
_channel_ids = itertools.count()


def _client():
    from jax._src import distributed  # the client orbax uses as well; there is no public alias

    client = distributed.global_state.client
    if client is None:
        raise RuntimeError(
            "Several JAX processes but no distributed client: call jax.distributed.initialize() "
            "(or use a multi-worker strategy) before building multi-process input pipelines."
        )
    return client


class ProcessChannel:
    """Exchanges one small integer per worker per round; `gather` returns everyone's, in
    process order. Channels must be created in the same order on every worker."""

    def __init__(self, processes: Sequence[int], timeout_s: float):
        self._processes = tuple(processes)
        self._me = jax.process_index()
        self._timeout_ms = int(timeout_s * 1000)
        self._name = f"jdist_input/{next(_channel_ids)}" if len(self._processes) > 1 else "local"

    @property
    def is_local(self) -> bool:
        return len(self._processes) <= 1

    def gather(self, tag: str, round_index: int, value: int) -> list[int]:
        if self.is_local:
            return [value]
        client = _client()
        key = f"{self._name}/{tag}/{round_index}"
        client.key_value_set(f"{key}/{self._me}", str(int(value)), allow_overwrite=True)
        values = []
        for process in self._processes:
            if process == self._me:
                values.append(int(value))
                continue
            try:
                values.append(int(client.blocking_key_value_get(f"{key}/{process}", self._timeout_ms)))
            except Exception as err:  # the client raises its own runtime error type on timeout
                raise TimeoutError(
                    f"Input pipeline: process {process} did not report its position for {tag} round "
                    f"{round_index} within {self._timeout_ms / 1000:.0f} s; it may have crashed, be stuck "
                    "reading data, or be iterating a different dataset/epoch (every process must iterate "
                    "the same distributed datasets in the same order). Raise "
                    "InputOptions(cross_process_timeout_s=...) if its input is just slow."
                ) from err
        if round_index >= _GC_LAG:
            try:
                client.key_value_delete(f"{self._name}/{tag}/{round_index - _GC_LAG}/{self._me}")
            except Exception:  # best effort: a missing key is fine
                pass
        return values

    def publish(self, tag: str, text: str) -> None:
        """Makes `text` readable by the other workers under `tag`."""
        if not self.is_local:
            _client().key_value_set(f"{self._name}/{tag}/{self._me}", text, allow_overwrite=True)

    def read(self, tag: str, process: int) -> str:
        """What `process` published under `tag` (waits for it, bounded)."""
        try:
            return _client().blocking_key_value_get(f"{self._name}/{tag}/{process}", self._timeout_ms)
        except Exception as err:
            raise TimeoutError(
                f"Input pipeline: process {process} did not publish {tag} within {self._timeout_ms / 1000:.0f} s."
            ) from err
