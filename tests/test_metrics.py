import math

import pytest

from ringleader.metrics import JobRecord, UsagePoint, mean_ci95, percentile, summarize


def test_summary_of_a_hand_made_run() -> None:
    records = [
        JobRecord("a", 0.0, 0.0, 100.0),
        JobRecord("b", 10.0, 50.0, 210.0),
        JobRecord("c", 20.0, None, None),
    ]
    usage = [UsagePoint(0.0, 2, 2, 1), UsagePoint(50.0, 4, 4, 2), UsagePoint(210.0, 0, 0, 0)]
    s = summarize(records, usage, gpus=4)
    assert (s.jobs, s.finished) == (3, 2)
    assert s.avg_jct_s == pytest.approx((100 + 200) / 2)
    assert s.avg_queueing_s == pytest.approx((0 + 40) / 2)
    assert s.makespan_s == 210.0
    assert s.utilization == pytest.approx((2 * 50 + 4 * 160) / (4 * 210))
    assert s.peak_jobs == 2


def test_percentile_and_empty_input() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert math.isnan(percentile([], 99))


def test_ci95_uses_students_t() -> None:
    mean, half = mean_ci95([1.0, 2.0, 3.0])
    assert mean == 2.0
    assert half == pytest.approx(4.302653 * 1.0 / math.sqrt(3), rel=1e-5)
    assert math.isnan(mean_ci95([5.0])[1])
