"""The spine: plan diffing, counted events, observations, views and needs, written once."""

from __future__ import annotations

import ast
import copy
import pathlib
import pickle

import pytest

from ringleader.perf.epochs import EpochsToConverge
from ringleader.policy.catalog import POLICY_NAMES, policy_named
from ringleader.policy.model.needs import Needs
from ringleader.policy.model.plan import Assignment, Plan
from ringleader.policy.model.views import ClusterView, Device, JobView, Observation
from ringleader.policy.pipeline import Policy
from ringleader.policy.profile.sources import Exploratory
from ringleader.sim.engine import Simulator
from ringleader.sim.profiles import RESNET110_K40
from ringleader.sim.submitted import SimJob
from ringleader.spine.actions import (
    Held,
    Kind,
    Launch,
    Resume,
    Stop,
    Suspend,
    Why,
    diff_one,
    launch_kind,
)
from ringleader.spine.effects import carry_out
from ringleader.spine.needs import ON_SLURM, RUNTIME, SIMULATOR, PolicyNotServed, serve_policy
from ringleader.spine.observe import co_runners, fold
from ringleader.spine.views import Known, Submitted, job_view
from tests.helpers import SHAPE

A, B, C, D = (Device("n0", i) for i in range(4))


def plan(**assignments: Assignment) -> Plan:
    return Plan(assignments)


# -- diff ---------------------------------------------------------------------


def test_a_queued_job_with_a_target_is_launched_as_a_start() -> None:
    actions = diff_one("j", Held(), plan(j=Assignment((A, B), 2)))
    assert actions == [Launch("j", (A, B), Kind.START)]


def test_a_new_size_is_a_stop_then_a_launch_counted_as_a_resize() -> None:
    held = Held((A,), last=(A,))
    actions = diff_one("j", held, plan(j=Assignment((A, B), 2)))
    assert actions == [Stop("j", Why.RESIZE), Launch("j", (A, B), Kind.RESIZE)]


def test_the_same_size_elsewhere_is_a_migration() -> None:
    held = Held((A, B), last=(A, B))
    actions = diff_one("j", held, plan(j=Assignment((C, D), 2)))
    assert actions == [Stop("j", Why.MIGRATE), Launch("j", (C, D), Kind.MIGRATION)]


def test_no_target_preempts_and_a_later_launch_in_place_is_a_restart() -> None:
    assert diff_one("j", Held((A,), last=(A,)), plan()) == [Stop("j", Why.PREEMPT)]
    assert diff_one("j", Held(last=(A,)), plan(j=Assignment((A,), 1))) == [
        Launch("j", (A,), Kind.RESTART)
    ]


def test_time_slicing_on_the_same_devices_suspends_and_resumes() -> None:
    running, parked = Held((A,), last=(A,)), Held((A,), suspended=True, last=(A,))
    assert diff_one("j", running, plan(j=Assignment((A,), 1, suspended=True))) == [Suspend("j")]
    assert diff_one("j", parked, plan(j=Assignment((A,), 1))) == [Resume("j")]
    assert diff_one("j", parked, plan(j=Assignment((A,), 1, suspended=True))) == []
    assert diff_one("j", running, plan(j=Assignment((A, B), 1))) == []  # holds B unused


def test_a_job_placed_in_a_group_but_never_started_waits_without_actions() -> None:
    assert diff_one("j", Held(), plan(j=Assignment((A,), 1, suspended=True))) == []


def test_launch_kinds() -> None:
    assert launch_kind(None, (A,)) is Kind.START
    assert launch_kind((A,), (A, B)) is Kind.RESIZE
    assert launch_kind((A, B), (B, C)) is Kind.MIGRATION
    assert launch_kind((A, B), (B, A)) is Kind.RESTART


# -- observations -------------------------------------------------------------


def test_fold_is_seconds_over_minibatches_for_steps_and_for_stretches() -> None:
    seen = None
    for t in (0.1, 0.2, 0.3):  # the runtime: one minibatch at a time
        seen = fold(seen, t, t, 32)
    assert seen is not None
    assert seen.step_time == pytest.approx(0.2)
    assert seen.seconds == pytest.approx(0.6)
    # The simulator: 10 s at 0.1 s per step, then 10 s at 0.2 s per step.
    stretch = fold(fold(None, 0.1, 10.0, 32), 0.2, 10.0, 32)
    assert stretch.step_time == pytest.approx(20.0 / 150.0)
    assert fold(Observation(0.5, 3.0, 8), 0.5, 1.0, 0) == Observation(0.5, 4.0, 8)


def test_an_observation_is_a_value() -> None:
    # Written by hand for speed (see its docstring): equal and hashed by its fields,
    # and it survives pickling and copying as the frozen dataclass it replaced did.
    seen = Observation(0.5, 3.0, 8.0)
    assert seen == Observation(step_time=0.5, seconds=3.0, batch_per_worker=8.0)
    assert seen != Observation(0.5, 3.5, 8.0)
    assert seen != (0.5, 3.0, 8.0)
    assert len({seen, Observation(0.5, 3.0, 8.0), Observation(0.5, 4.0, 8.0)}) == 2
    assert pickle.loads(pickle.dumps(seen)) == seen
    assert copy.deepcopy(seen) == seen
    assert repr(seen) == "Observation(step_time=0.5, seconds=3.0, batch_per_worker=8.0)"


def test_a_device_is_an_ordered_value() -> None:
    # Written by hand for speed too: ordered by (node, index) as the ordered dataclass
    # it replaced was, hashed as that tuple (so sets of devices iterate as before).
    a, b, c = Device("n1", 2), Device("n1", 10), Device("n0", 7)
    assert sorted([b, a, c]) == [c, a, b]
    assert a < b and not b < a and a <= Device("n1", 2) and b > a and c <= a and b >= a
    assert a == Device("n1", 2) and a != b and a != ("n1", 2)
    assert hash(a) == hash(("n1", 2))
    assert len({a, Device("n1", 2), b}) == 2
    assert pickle.loads(pickle.dumps(a)) == a and copy.deepcopy(b) == b
    assert repr(c) == "Device(node='n0', index=7)"


def test_an_assignment_is_a_value() -> None:
    # Written by hand for speed too: equal and hashed by its fields, checked on making,
    # and it survives pickling and copying.
    on = (Device("n0", 0), Device("n0", 1))
    a = Assignment(on, 1)
    assert a == Assignment(devices=on, workers=1, suspended=False) and a != Assignment(on, 2)
    assert a != Assignment(on, 1, suspended=True) and a != (on, 1, False)
    assert len({a, Assignment(on, 1), Assignment(on, 2)}) == 2
    assert hash(a) == hash((on, 1, False))
    assert pickle.loads(pickle.dumps(a)) == a and copy.deepcopy(a) == a
    assert a.running and a.resident and a.active_devices == on[:1]
    assert not Assignment(on, 1, True).running and Assignment() == Assignment((), 0)
    assert repr(a).startswith("Assignment(devices=(Device(node='n0', index=0), ")
    with pytest.raises(ValueError, match="workers"):
        Assignment(on, 3)


def test_co_runners_are_jobs_on_a_shared_device() -> None:
    got = co_runners({"x": [A], "y": [A, B], "z": [C], "w": [B]})
    assert got == {"x": ("y",), "y": ("w", "x"), "w": ("y",)}  # z runs alone


# -- views ---------------------------------------------------------------------


def _view(needs: Needs, held: Held, placed: Assignment | None) -> JobView:
    known = Known(SHAPE, EpochsToConverge.constant(10), 1.0, {}, {}, 0.0, 0.0)
    submitted = Submitted("j", 0.0, 1, 64, 1, True)
    truth = RESNET110_K40.speed_model
    return job_view(submitted, known, held, placed, capacity=4, needs=needs, truth=truth)


def test_only_a_policy_given_the_truth_sees_it_and_sizes_never_pass_the_cluster() -> None:
    assert _view(Needs(true_model=True), Held(), None).speed is not None
    assert _view(Needs(speed_model=True), Held(), None).speed is None
    assert _view(Needs(), Held(), None).max_gpus == 4


def test_a_view_keeps_a_placement_in_a_group_and_extra_held_devices() -> None:
    parked = _view(Needs(), Held(), Assignment((B,), 1, suspended=True))
    assert (parked.devices, parked.workers, parked.suspended) == ((B,), 1, True)
    probing = _view(Needs(), Held((A,)), Assignment((A, B), 1))
    assert (probing.devices, probing.workers) == ((A, B), 1)
    moved = _view(Needs(), Held((A,)), Assignment((C,), 1))  # not carried out yet
    assert (moved.devices, moved.workers) == ((A,), 1)


def test_online_policies_learn_in_the_simulator_and_oracles_are_given_the_truth() -> None:
    seen: dict[str, list[JobView]] = {}
    measured: list[int] = []

    def watch(name: str) -> None:
        inner = policy_named(name)

        class Watch:
            needs = inner.needs

            @property
            def name(self) -> str:
                return name

            def decide(self, views: list[JobView], cluster: ClusterView, now: float) -> Plan:
                seen.setdefault(name, []).extend(views)
                if name == "elastic":
                    measured.append(len(views[0].observations))
                return inner.decide(views, cluster, now)

        job = SimJob("j", 0.0, RESNET110_K40, max_gpus=4, work_scale=0.2)
        Simulator(Watch(), ClusterView.uniform(1, 4), [job]).run()

    for name in ("elastic", "ringleader", "precompute", "srtf-oracle"):
        watch(name)
    assert all(v.speed is None for v in seen["elastic"] + seen["ringleader"])
    assert all(v.speed is not None for v in seen["precompute"] + seen["srtf-oracle"])
    # What the online learner saw grew from nothing to measured sizes.
    assert measured[0] == 0 and max(measured) >= 1


# -- needs -----------------------------------------------------------------------


def test_the_runtime_refuses_oracles_and_measures_what_precompute_is_given() -> None:
    with pytest.raises(PolicyNotServed, match="oracle"):
        serve_policy(policy_named("srtf-oracle"), RUNTIME)
    served = serve_policy(policy_named("precompute"), RUNTIME)
    assert isinstance(served, Policy) and isinstance(served.profiling, Exploratory)
    assert not served.needs.true_model and len(served.profiling.probe_sizes) >= 2
    gandiva = policy_named("gandiva")
    assert serve_policy(gandiva, RUNTIME) is gandiva
    for name in POLICY_NAMES:
        policy = policy_named(name)
        assert serve_policy(policy, SIMULATOR) is policy


# -- one spine ---------------------------------------------------------------------


BODIES = [
    ("src/ringleader/sim/engine.py", "src/ringleader/sim/jobs.py", "src/ringleader/sim/playing.py"),
    (
        "src/ringleader/runtime/control/controller.py",
        "src/ringleader/runtime/control/observing.py",
        "src/ringleader/runtime/control/acting.py",
    ),
]
ACTION_TYPES = {"Stop", "Launch", "Suspend", "Resume"}


@pytest.mark.parametrize("body", BODIES)
def test_bodies_diff_plans_only_through_the_spine(body: tuple[str, ...]) -> None:
    """No body compares a target's devices with what runs: that is ``diff_one``'s job,
    and ``spine.effects.carry_out`` hands its actions to the body's effects."""
    sources = [(pathlib.Path(__file__).parents[1] / path).read_text() for path in body]
    for path, source in zip(body, sources, strict=True):
        compared = [
            node
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Compare)
            and any(
                isinstance(side, ast.Attribute) and side.attr == "active_devices"
                for side in (node.left, *node.comparators)
            )
        ]
        assert not compared, f"{path} diffs a plan itself at line {compared[0].lineno}"
    whole = "\n".join(sources)
    assert "carry_out(" in whole and "job_view" in whole
    assert "decide_round(" in whole


@pytest.mark.parametrize("body", BODIES)
def test_no_body_dispatches_over_action_types(body: tuple[str, ...]) -> None:
    """Each body implements ``spine.effects.Effects``; telling a stop from a launch is the
    spine's, once, so both bodies carry out the same actions the same way."""
    for path in body:
        tree = ast.parse((pathlib.Path(__file__).parents[1] / path).read_text())
        named = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Name) and node.id in ACTION_TYPES
        ]
        assert not named, f"{path} names the action type {named[0].id} at line {named[0].lineno}"


def _effects_log() -> tuple[list[tuple[object, ...]], type]:
    log: list[tuple[object, ...]] = []

    class Recording:
        stops_at_once = True

        def launch(self, job: str, devices: tuple[Device, ...], kind: Kind) -> None:
            log.append(("launch", job, devices, kind))

        def stop(self, job: str, why: Why) -> None:
            log.append(("stop", job, why))

        def suspend(self, job: str) -> None:
            log.append(("suspend", job))

        def resume(self, job: str) -> None:
            log.append(("resume", job))

    return log, Recording


def test_a_migration_is_a_stop_and_a_launch_and_a_slow_stop_waits_for_its_launch() -> None:
    old, new = (Device("n0", 0),), (Device("n1", 0),)
    plan = Plan({"j": Assignment(new, 1)})
    held = Held(old, last=old)
    log, recording = _effects_log()
    carry_out("j", "j", held, plan, recording())
    assert log == [("stop", "j", Why.MIGRATE), ("launch", "j", new, Kind.MIGRATION)]
    log.clear()
    slow = recording()
    slow.stops_at_once = False  # the runtime's processes exit later: the launch waits
    carry_out("j", "j", held, plan, slow)
    assert log == [("stop", "j", Why.MIGRATE)]
    log.clear()
    carry_out("j", "j", Held(new, suspended=True, last=new), plan, recording())
    assert log == [("resume", "j")]


def test_a_jobs_view_is_moved_on_in_place_as_it_is_placed_and_progresses() -> None:
    from ringleader.sim.jobs import JobState

    state = JobState(SimJob("a", 0.0, RESNET110_K40, max_gpus=2), state_since=0.0)
    waiting = state.view(8, Needs(), 3.8)
    assert state.view(8, Needs(), 3.8) is waiting  # nothing changed: the same object
    state.carry_out(Assignment((Device("n0", 0), Device("n0", 1)), 2), alive=True)
    state.state_since = 5.0
    state.moved()  # as the simulator's _apply does on a new placement
    state.pace()
    running = state.view(8, Needs(), 3.8)
    assert running is waiting and running.workers == 2 and running.state_since == 5.0
    assert running.devices == (Device("n0", 0), Device("n0", 1)) and not running.suspended
    state.advance(0.0, 60.0)
    measured = state.view(8, Needs(), 3.8)
    assert measured is not running  # its first step time at 2 GPUs: a new view
    state.advance(60.0, 120.0)
    moved = state.view(8, Needs(), 3.8)
    assert moved is measured
    assert moved.remaining_fraction == state.remaining < 1.0
    assert moved.attained_gpu_s == state.attained_gpu_s == 240.0
    assert moved.observations[2].seconds == 120.0


def test_a_new_step_time_comes_in_a_new_view_and_only_then() -> None:
    """A view stands for one set of step times (``spine.views``): stages keep what they
    worked out from them for as long as they get the same object."""
    from ringleader.sim.jobs import JobState

    state = JobState(SimJob("a", 0.0, RESNET110_K40, max_gpus=2), state_since=0.0)
    state.carry_out(Assignment((Device("n0", 0),), 1), alive=True)
    state.moved()
    state.pace()
    before = state.view(8, Needs(), 3.8)
    state.advance(0.0, 30.0)  # a size measured for the first time
    first = state.view(8, Needs(), 3.8)
    assert first is not before and set(first.observations) == {1}
    step = first.observations[1].step_time
    state.advance(30.0, 60.0)  # measured longer at the same step time
    assert state.view(8, Needs(), 3.8) is first and first.observations[1].seconds == 60.0
    state.factor = 0.5  # slowed down, as by contention: a new step time
    state.pace()
    state.advance(60.0, 90.0)
    slowed = state.view(8, Needs(), 3.8)
    assert slowed is not first and slowed.observations[1].step_time > step


@pytest.mark.parametrize("seed", range(6))
def test_a_view_moved_in_place_is_the_view_built_afresh(seed: int) -> None:
    """Random placements carried out (launches, suspends, resumes, moves, stops, places
    in a group not yet started) and progress: the kept view, moved on in place, equals
    one built anew from the same state at every step."""
    import dataclasses
    import random

    from ringleader.sim.jobs import JobState

    rng = random.Random(seed)
    devices = [Device(f"n{i // 2}", i % 2) for i in range(4)]
    state = JobState(SimJob("a", 0.0, RESNET110_K40, max_gpus=2), state_since=0.0)
    kept = state.view(4, Needs(), 3.8)
    now = 0.0
    for _ in range(60):
        workers = rng.choice([0, 1, 2])
        chosen = tuple(sorted(rng.sample(devices, rng.choice([workers, 2]) if workers else 0)))
        target = (
            Assignment(chosen, workers, suspended=rng.random() < 0.4) if workers else Assignment()
        )
        was_running = state.running
        state.carry_out(target, alive=rng.random() < 0.7)
        now += rng.choice([0.0, 1.0, 30.0])
        if state.running != was_running:
            state.state_since = now
        state.moved()
        sizes = len(state.observations)
        if state.running and rng.random() < 0.5:
            state.pace()
            state.advance(now, now + 10.0)
            now += 10.0
        view = state.view(4, Needs(), 3.8)
        # Kept, unless a size was measured for the first time (spine.views).
        assert (view is kept) == (len(state.observations) == sizes)
        kept = view
        fresh = dataclasses.replace(state, seen=None).view(4, Needs(), 3.8)
        assert fresh is not view and fresh == view
        assert (view.devices, view.workers, view.suspended, view.state_since) == (
            fresh.devices,
            fresh.workers,
            fresh.suspended,
            fresh.state_since,
        )


def test_deciding_freezes_the_heap_it_did_not_make_and_hands_it_back_after_an_error() -> None:
    import gc

    from ringleader.spine.deciding import decide

    seen: list[tuple[bool, int]] = []

    class Failing:
        name = "failing"
        needs = Needs()

        def decide(self, jobs: object, cluster: object, now: float) -> Plan:
            seen.append((gc.isenabled(), gc.get_freeze_count()))
            raise RuntimeError("policy bug")

    assert gc.isenabled() and gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError):
        decide(Failing(), [], ClusterView.uniform(1, 1), 0.0)
    # The collector runs for the process's other threads; only the old heap is out of it.
    assert seen[0][0] and seen[0][1] > 0
    assert gc.isenabled() and gc.get_freeze_count() == 0
    # A body alone in its process pauses the collector; someone else's switch stays off.
    with pytest.raises(RuntimeError):
        decide(Failing(), [], ClusterView.uniform(1, 1), 0.0, alone=True)
    assert seen[1] == (False, 0) and gc.isenabled()
    gc.disable()
    try:
        with pytest.raises(RuntimeError):
            decide(Failing(), [], ClusterView.uniform(1, 1), 0.0, alone=True)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_what_a_job_holds_is_a_value() -> None:
    import pickle

    held = Held((A, B), True, (A,))
    same = Held((A, B), True, (A,))
    assert held == same and hash(held) == hash(same) and held.__ne__(same) is False
    assert held != Held((A, B), False, (A,)) and held != Held((A, B), True, None)
    assert held != Held((A,), True, (A,))
    assert pickle.loads(pickle.dumps(held)) == held
    assert repr(Held()) == "Held(devices=(), suspended=False, last=None)"


@pytest.mark.parametrize(
    ("action", "same", "others"),
    [
        (
            Stop("j", Why.RESIZE),
            Stop("j", Why.RESIZE),
            [Stop("j", Why.MIGRATE), Stop("k", Why.RESIZE)],
        ),
        (
            Launch("j", (A, B), Kind.START),
            Launch("j", (A, B), Kind.START),
            [
                Launch("j", (A,), Kind.START),
                Launch("j", (A, B), Kind.RESIZE),
                Launch("k", (A, B), Kind.START),
            ],
        ),
        (Suspend("j"), Suspend("j"), [Suspend("k"), Resume("j")]),
        (Resume("j"), Resume("j"), [Resume("k"), Suspend("j")]),
    ],
)
def test_an_action_is_a_value(action: object, same: object, others: list[object]) -> None:
    """Equal and hashed by class and fields, like the frozen dataclasses they were."""
    assert action == same and hash(action) == hash(same) and action.__ne__(same) is False
    for other in others:
        assert action != other and other != action
    assert action != "j" and action != ("j",)
    assert pickle.loads(pickle.dumps(action)) == action
    assert copy.copy(action) == action
    assert len({action, same, *others}) == 1 + len(others)
    assert repr(Suspend("j")) == "Suspend(job='j')"
    assert repr(Launch("j", (), Kind.START)) == f"Launch(job='j', devices=(), kind={Kind.START!r})"


def test_the_compiled_way_of_making_a_view_stores_every_field_as_the_class_call_does() -> None:
    # Compiled, ``job_view`` stores each field of an empty view (``_stored``) instead of
    # calling the frozen class; the two must give every field the same value.
    import dataclasses

    from ringleader.hotpath import source_of

    tree = ast.parse(source_of("ringleader.spine.views").read_text())
    functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    called = {
        k.arg: ast.unparse(k.value)
        for node in ast.walk(functions["job_view"])
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "JobView"
        for k in node.keywords
    }
    stored = {
        target.attr: ast.unparse(node.value)
        for node in ast.walk(functions["_stored"])
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Attribute) and ast.unparse(target.value) == "view"
    }
    assert set(stored) == {f.name for f in dataclasses.fields(JobView)}
    # A field not given to the class (the stages' memo) is stored as its default.
    defaults = {f.name: repr(f.default) for f in dataclasses.fields(JobView) if not f.init}
    assert defaults == {"memo": "None"}
    assert stored == {**called, **defaults}


def test_views_change_in_place_only_in_the_spine_views_module() -> None:
    # A frozen object changed behind its back is a convention nobody can see: a body
    # moves a kept view on only through ``spine.views`` (``progress_view``,
    # ``placement_view``); the policy hangs its memo on a view only through ``memo_of``.
    import ast
    import pathlib

    root = pathlib.Path(__file__).parents[1] / "src" / "ringleader"
    allowed = {root / "spine" / "views.py", root / "policy" / "model" / "views.py"}
    for path in root.rglob("*.py"):
        text = path.read_text()
        if path not in allowed:
            assert "ignore[misc]" not in text, f"{path}: a frozen field written in place"
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.FunctionDef):
                continue
            for call in ast.walk(node):
                if (
                    isinstance(call, ast.Call)
                    and ast.unparse(call.func) == "object.__setattr__"
                    and not (node.name == "__post_init__" or node.name == "memo_of")
                ):
                    raise AssertionError(f"{path}:{call.lineno}: object.__setattr__ in {node.name}")


def test_on_slurm_the_default_runs_without_sharing_and_a_sharing_policy_is_refused() -> None:
    default = policy_named("ringleader")
    assert default.needs.time_slicing and default.needs.packing
    served = serve_policy(default, ON_SLURM)
    assert isinstance(served, Policy) and served.share is None
    assert not served.needs.time_slicing and not served.needs.packing
    assert served.size == default.size and served.order == default.order  # the rest stands
    for sharing in ("time-slicing", "gandiva"):
        with pytest.raises(PolicyNotServed, match="keeps its GPUs until it exits"):
            serve_policy(policy_named(sharing), ON_SLURM)
    assert serve_policy(policy_named("elastic"), ON_SLURM) == policy_named("elastic")
