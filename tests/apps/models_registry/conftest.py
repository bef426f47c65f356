"""Fixtures of the model registry tests: the simulated study and a registering helper."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from apps.models_registry.models import ModelRun
from apps.models_registry.services import Upload
from tests.apps.models_registry.simulation import (
    SimulatedStudy,
    jsonl,
    prediction_rows,
    register_and_evaluate,
    simulated_study,
)


@pytest.fixture
def sim(db) -> SimulatedStudy:
    return simulated_study()


@pytest.fixture
def register(sim: SimulatedStudy) -> Callable[..., ModelRun]:
    """``register(name, codes, features=rows, attention=rows)``: a run from code matrices."""

    def register_(name: str, codes, **vector_rows) -> ModelRun:
        return register_and_evaluate(
            study=sim.study,
            question=sim.question,
            name=name,
            version="1",
            created_by=sim.study.created_by,
            predictions=Upload(jsonl(prediction_rows(sim, codes)), "jsonl"),
            **{kind: Upload(jsonl(rows), "jsonl") for kind, rows in vector_rows.items()},
        )

    return register_
