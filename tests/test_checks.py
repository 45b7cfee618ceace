"""The provider output checks keep their outcome on every path, the short ones included.

``check_hits`` and ``check_vector`` test the common case (plain ``str``/``float`` fields, a
list of floats or of numpy float64) with a short test and everything else with the general
one; these cases sit on the line between the two.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragtiller.nodes.checks import InvalidOutput, check_hits, check_vector


class Text(str):
    """A str subclass, as some clients return."""


class Real(float):
    """A float subclass."""


def test_vector_of_numpy_float64_comes_back_as_plain_floats() -> None:
    out = check_vector([np.float64(0.5), np.float64(-2.0)])
    assert out == [0.5, -2.0]
    assert [type(x) for x in out] == [float, float]


def test_vector_of_ints_and_float_subclasses_comes_back_as_plain_floats() -> None:
    assert [type(x) for x in check_vector([1, 2.5])] == [float, float]
    assert [type(x) for x in check_vector([Real(1.5), 2.0])] == [float, float]
    assert check_vector(np.array([0.25, 0.75])) == [0.25, 0.75]


@pytest.mark.parametrize(
    "vector",
    [
        [np.float64("nan"), 1.0],
        [Real("inf")],
        [float("-inf"), 0.0],
        [np.float32(0.5)],  # not a float: refused as before
        [True, 1.0],
        [1.0, "x"],
        [None],
        [],
    ],
)
def test_vector_that_is_not_finite_numbers_is_refused(vector: list[object]) -> None:
    with pytest.raises(InvalidOutput):
        check_vector(vector)


def test_hit_fields_of_str_subclasses_and_numpy_scores_become_plain() -> None:
    [hit] = check_hits(
        [
            {
                "id": "a",
                "text": "t",
                "score": np.float64(0.5),
                "doc_id": Text("d"),
                "source": Text("s"),
                "parent_id": Text("p"),
            }
        ],
        5,
    )
    assert hit == {
        "id": "a",
        "text": "t",
        "score": 0.5,
        "doc_id": "d",
        "parent_id": "p",
        "source": "s",
        "metadata": {},
    }
    assert type(hit["score"]) is float
    assert type(hit["doc_id"]) is str and type(hit["source"]) is str
    assert list(hit) == ["id", "text", "score", "doc_id", "parent_id", "source", "metadata"]


def test_hit_defaults_for_empty_or_odd_optional_fields() -> None:
    [hit] = check_hits(
        [{"id": "a", "text": "t", "score": 2, "doc_id": "", "source": None, "parent_id": 3}], 5
    )
    assert hit["doc_id"] == "a" and hit["source"] == "" and hit["parent_id"] is None
    assert type(hit["score"]) is float and hit["score"] == 2.0
    assert hit["metadata"] == {}


@pytest.mark.parametrize(
    ("score", "message"),
    [
        (True, "not a finite number"),
        (math.nan, "not a finite number"),
        (math.inf, "not a finite number"),
        ("1", "not a finite number"),
        (None, "not a finite number"),
        (Real("nan"), "not a finite number"),
    ],
)
def test_hit_score_that_is_not_a_finite_number_is_refused(score: object, message: str) -> None:
    with pytest.raises(InvalidOutput, match=message):
        check_hits([{"id": "a", "text": "t", "score": score}], 5)


def test_hits_are_cut_to_k_and_ids_must_be_unique() -> None:
    hits = [{"id": f"h{i}", "text": "t", "score": 1.0 - i / 10} for i in range(5)]
    assert [h["id"] for h in check_hits(hits, 3)] == ["h0", "h1", "h2"]
    with pytest.raises(InvalidOutput, match="appears twice"):
        check_hits([hits[0], hits[0]], 5)
