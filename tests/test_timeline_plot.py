"""The demo's GPUs-per-job figure, from hand-made job events.

Three jobs on 4 GPUs: ``big`` runs on 4, is resized to 2 and finishes;
``small`` starts on the 2 freed, is suspended while ``slice`` runs on its
devices, then resumed, and finishes. The numbers the picture is drawn from are
checked against what those events say, and the PNG is checked to exist and
hold a picture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.image
import numpy as np
import pytest
from matplotlib.collections import PolyCollection

from ringleader.report.timeline import (
    Span,
    draw_gpu_timeline,
    gpu_series,
    gpu_timeline,
    job_spans,
    makespan,
    timeline_marks,
)

T0 = 1000.0  # absolute times, as the store writes them


def _job(job_id: str, user: str, events: list[tuple[float, str, dict[str, Any]]]) -> dict[str, Any]:
    return {
        "id": job_id,
        "name": job_id,
        "user": user,
        "events": [{"t": T0 + t, "kind": kind, **detail} for t, kind, detail in events],
    }


def _jobs() -> list[dict[str, Any]]:
    big = _job(
        "big",
        "alice",
        [
            (0.0, "submitted", {}),
            (0.5, "launched", {"workers": 4, "counted": "start", "generation": 1}),
            (10.0, "stop_requested", {"reason": "resize", "generation": 1}),
            (10.5, "stopped", {"reason": "resize", "generation": 1}),
            (11.0, "launched", {"workers": 2, "counted": "resize", "generation": 2}),
            (30.0, "succeeded", {"generation": 2}),
        ],
    )
    small = _job(
        "small",
        "bob",
        [
            (5.0, "submitted", {}),
            (11.0, "launched", {"workers": 2, "counted": "start", "generation": 1}),
            (15.0, "suspend_requested", {"generation": 1}),
            (20.0, "resume_requested", {"generation": 1}),
            (25.0, "succeeded", {"generation": 1}),
        ],
    )
    time_slice = _job(
        "slice",
        "carol",
        [
            (12.0, "submitted", {}),
            (15.2, "launched", {"workers": 2, "counted": "start", "generation": 1}),
            (19.5, "succeeded", {"generation": 1}),
        ],
    )
    # Events out of order: the store's are in order, but nothing here relies on it.
    small["events"].reverse()
    return [big, small, time_slice]


@pytest.mark.parametrize(
    ("t", "big", "small", "time_slice"),
    [
        (0.2, 0, 0, 0),  # submitted, not launched yet
        (5.0, 4, 0, 0),
        (10.2, 4, 0, 0),  # stop asked, still running
        (10.7, 0, 0, 0),  # stopped, not yet relaunched
        (12.0, 2, 2, 0),  # resized to 2; small runs on the other 2
        (16.0, 2, 0, 2),  # small suspended, slice on its devices
        (19.7, 2, 0, 0),  # slice done, small not yet resumed
        (21.0, 2, 2, 0),
        (26.0, 2, 0, 0),
        (31.0, 0, 0, 0),
    ],
)
def test_the_series_holds_each_jobs_gpus_at_each_time(
    t: float, big: int, small: int, time_slice: int
) -> None:
    series = gpu_series(_jobs())
    assert (series.at("big", t), series.at("small", t), series.at("slice", t)) == (
        big,
        small,
        time_slice,
    )
    assert series.total(t) == big + small + time_slice <= 4


def test_the_series_is_one_step_grid_from_the_first_submission() -> None:
    series = gpu_series(_jobs())
    assert series.times == sorted(series.times)
    assert series.times[0] == 0.0
    for t in (0.5, 10.5, 11.0, 15.0, 15.2, 19.5, 20.0, 25.0, 30.0):
        assert t == pytest.approx(min(series.times, key=lambda x: abs(x - t)))
    assert all(len(v) == len(series.times) for v in series.held.values())
    assert series.held["big"][series.times.index(11.0)] == 2
    assert series.held["small"][series.times.index(15.0)] == 0


def test_the_marks_are_the_resize_suspend_resume_and_finishes() -> None:
    marks = [(m.t, m.job_id, m.kind, m.note) for m in timeline_marks(_jobs())]
    assert marks == [
        (11.0, "big", "resize", "4→2"),
        (15.0, "small", "suspend", ""),
        (19.5, "slice", "finish", ""),
        (20.0, "small", "resume", ""),
        (25.0, "small", "finish", ""),
        (30.0, "big", "finish", ""),
    ]
    assert makespan(_jobs()) == pytest.approx(30.0)


def test_the_lanes_say_when_a_job_waited_ran_or_was_suspended() -> None:
    small = _jobs()[1]
    assert job_spans(small, T0) == [
        Span(5.0, 11.0, "waiting"),
        Span(11.0, 15.0, "running"),
        Span(15.0, 20.0, "suspended"),
        Span(20.0, 25.0, "running"),
    ]


def test_the_figure_stacks_one_area_per_job_and_names_them(tmp_path: Path) -> None:
    jobs = _jobs()
    fig = draw_gpu_timeline(jobs, 4)
    top, low = fig.axes[:2]
    areas = [c for c in top.collections if isinstance(c, PolyCollection)]
    assert len(areas) == 3
    # The last layer's upper edge is the total: 4 GPUs at the fullest, never more.
    assert max(v[1] for v in areas[-1].get_paths()[0].vertices) == pytest.approx(4.0)
    labels = [t.get_text() for t in top.get_legend().get_texts()]
    assert labels == ["big (alice)", "small (bob)", "slice (carol)", "cluster GPUs"]
    events = [t.get_text() for t in low.get_legend().get_texts()]
    assert events == ["waiting", "suspended", "resize", "suspend", "resume", "finished"]
    assert "3 jobs on 4 GPUs, 1 resize, makespan 30.0 s" in top.get_title()

    path = gpu_timeline(jobs, 4, tmp_path / "out" / "gpus.png")
    assert path.stat().st_size > 20_000
    image = matplotlib.image.imread(path)
    assert image.shape[0] > 500 and image.shape[1] > 1000
    assert len(np.unique(image[..., 0])) > 20  # not blank: many shades of red alone


def test_binned_mean_weighs_each_step_by_the_time_it_lasts() -> None:
    from ringleader.report.plots import binned_mean

    centres, means = binned_mean([(0.0, 1.0), (1.0, 3.0), (3.0, 0.0)], 4.0, bins=2)
    assert list(centres) == [1.0, 3.0]
    assert list(means) == [2.0, 1.5]  # (1 + 3) / 2, then (3 + 0) / 2
    centres, means = binned_mean([(0.5, 1.0), (1.0, 3.0)], 2.0, bins=3)
    assert list(means) == [1.0, 3.0, 3.0]
    assert binned_mean([], 1.0)[0].size == 0
