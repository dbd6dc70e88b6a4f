"""Sparse row sums of gradients (``add_rows``, ``sum_rows``) against numpy's ``add.at``."""
import numpy as np
import pytest

from ops_registry.gradients import LONG_GROUP, add_rows, sum_rows


@pytest.mark.parametrize("rows", [[3, 1, 3, -1, 0, 4, 1, 3], [2, 2], [0], [], [4, -5]])
def test_add_rows_equals_add_at_with_repeated_and_negative_rows(rows):
    rng = np.random.default_rng(0)
    rows = np.array(rows, np.int64)
    values = rng.standard_normal((len(rows), 3)).astype(np.float32)
    want = rng.standard_normal((5, 3)).astype(np.float32)
    got = want.copy()
    np.add.at(want, rows, values)
    add_rows(np, got, rows, values)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_sum_rows_sums_each_distinct_row_in_order():
    rows = np.array([7, 2, 7, 9, 2, 7])
    values = np.arange(12.0).reshape(6, 2)
    distinct, sums = sum_rows(np, rows, values)
    np.testing.assert_array_equal(distinct, [2, 7, 9])
    np.testing.assert_array_equal(sums, [values[[1, 4]].sum(0), values[[0, 2, 5]].sum(0), values[3]])
    empty = sum_rows(np, rows[:0], values[:0])
    assert empty[0].shape == (0,) and empty[1].shape == (0, 2)


def test_sum_rows_of_long_short_and_single_groups_equals_add_at():
    """A row seen more than LONG_GROUP times (summed apart), rows seen a few times, once."""
    rng = np.random.default_rng(1)
    rows = np.concatenate([np.full(3 * LONG_GROUP, 4), np.full(LONG_GROUP + 1, 9), rng.integers(0, 40, 200)])
    rows = rng.permutation(rows)
    values = rng.standard_normal((len(rows), 2, 3))
    distinct, sums = sum_rows(np, rows, values)
    want = np.zeros((40, 2, 3))
    np.add.at(want, rows, values)
    np.testing.assert_array_equal(distinct, np.unique(rows))
    np.testing.assert_allclose(sums, want[distinct], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("rows", [[0, 5], [-6, 1]])
def test_add_rows_refuses_rows_out_of_range_as_numpy(rows):
    with pytest.raises(IndexError):
        add_rows(np, np.zeros((5, 2)), np.array(rows), np.ones((2, 2)))
