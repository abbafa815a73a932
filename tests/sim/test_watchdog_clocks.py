"""The per-check limit counts the CPU a call used; a wall-clock backstop catches a blocked one.

Two default runs side by side (load ~25 on 2 cores) each lost a healthy ``layered`` episode to
"took longer than 5 s": the limit was wall time, and a µs check whose process was off the CPU
(descheduled, or stalled on a page fault) for 5 s looked like a hung detector. The tests drive
the watchdog's clocks by hand, so nothing here depends on how fast or loaded the machine is.
"""
import signal

import pytest

from detectors.protocol import setup_work
from sim.play import watchdog as wd


class Clocks:
    """A wall clock and the thread's CPU clock, advanced by the test."""

    def __init__(self):
        self.wall, self.cpu = 1000.0, 40.0

    def step(self, wall: float, cpu: float = 0.0) -> None:
        self.wall += wall
        self.cpu += cpu


def watchdog(clocks: Clocks, limit: float = 5.0) -> wd.Watchdog:
    return wd.Watchdog(limit, wall=lambda: clocks.wall, cpu=lambda: clocks.cpu)


def test_a_call_off_the_cpu_past_the_limit_is_not_an_overrun():
    # The old fault: 12 s of wall time, 1 ms of it on the CPU, was "longer than 5 s".
    clocks = Clocks()
    watch = watchdog(clocks)
    watch.begin()
    clocks.step(wall=12.0, cpu=0.001)
    watch.tick()  # no CheckTimeout
    clocks.step(wall=wd.blocked_limit(5.0) - 12.5, cpu=0.001)
    watch.tick()  # still under the backstop
    watch.end()


def test_a_call_that_computes_past_the_limit_is_interrupted_at_it():
    clocks = Clocks()
    watch = watchdog(clocks)
    watch.begin()
    clocks.step(wall=4.0, cpu=4.0)
    watch.tick()
    clocks.step(wall=9.0, cpu=1.1)  # on a loaded machine too: 5.1 s of CPU in 13 s
    with pytest.raises(wd.CheckTimeout, match=r"^a detector call took longer than 5 s of CPU time \(--check-timeout\)$"):
        watch.tick()


def test_cpu_used_outside_the_call_is_not_the_calls():
    clocks = Clocks()
    watch = watchdog(clocks)
    clocks.step(wall=30.0, cpu=30.0)  # the harness, or earlier calls
    watch.begin()
    clocks.step(wall=0.5, cpu=0.5)
    watch.tick()
    watch.end()
    clocks.step(wall=30.0, cpu=30.0)
    watch.tick()  # no call running: nothing to interrupt


def test_a_call_blocked_without_cpu_is_interrupted_at_the_backstop():
    # A sleep, a lock, a C call that lets signals through: no CPU, so only wall time ends it.
    blocked = wd.blocked_limit(5.0)
    assert 5.0 < blocked < wd.hard_limit(5.0)  # the pool kills only what the alarm cannot reach
    clocks = Clocks()
    watch = watchdog(clocks)
    watch.begin()
    clocks.step(wall=blocked + 0.1)
    with pytest.raises(wd.CheckTimeout, match=rf"^a detector call was blocked for over {blocked:g} s "
                                              r"\(--check-timeout 5\)$"):
        watch.tick()


def test_the_backstop_and_the_kill_follow_the_grace(monkeypatch):
    monkeypatch.setenv("LOOPBENCH_KILL_GRACE", "2")
    assert wd.blocked_limit(0.2) == pytest.approx(2.2)
    assert wd.hard_limit(0.2) == pytest.approx(4.2)
    monkeypatch.delenv("LOOPBENCH_KILL_GRACE")
    assert wd.blocked_limit(5.0) == 65.0 and wd.hard_limit(5.0) == 70.0


def test_a_swallowed_interruption_comes_again_one_limit_later():
    clocks = Clocks()
    watch = watchdog(clocks)
    watch.begin()
    clocks.step(wall=6.0, cpu=6.0)
    with pytest.raises(wd.CheckTimeout):
        watch.tick()
    clocks.step(wall=4.0, cpu=4.0)
    watch.tick()  # swallowed; the call goes on
    clocks.step(wall=1.5, cpu=1.5)
    with pytest.raises(wd.CheckTimeout):
        watch.tick()


def test_set_up_work_gives_the_call_a_fresh_limit_on_both_clocks():
    clocks = Clocks()
    watch = watchdog(clocks)
    with watch:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)  # this test ticks by hand
        watch.begin()
        clocks.step(wall=3.0, cpu=3.0)
        with setup_work():  # loading a model: neither clock counts
            assert watch.cell.value == 0.0
            clocks.step(wall=100.0, cpu=40.0)
        clocks.step(wall=3.0, cpu=3.0)
        watch.tick()  # 3 s since the set-up, not 6 (nor 106)
        clocks.step(wall=2.5, cpu=2.5)
        with pytest.raises(wd.CheckTimeout):
            watch.tick()
        watch.end()


def test_the_signal_handler_is_the_tick():
    # Armed in the main thread, SIGALRM runs tick(); the wall clock also stamps the pool's cell.
    clocks = Clocks()
    with watchdog(clocks) as watch:
        assert signal.getsignal(signal.SIGALRM) == watch.on_alarm
        assert signal.getitimer(signal.ITIMER_REAL)[1] > 0
        signal.setitimer(signal.ITIMER_REAL, 0, 0)  # from here the test ticks by hand
        watch.begin()
        assert watch.cell.value == clocks.wall
        clocks.step(wall=1.0, cpu=5.5)
        with pytest.raises(wd.CheckTimeout):
            watch.on_alarm(signal.SIGALRM, None)
    assert watch.cell.value == 0.0


def test_no_limit_never_interrupts():
    clocks = Clocks()
    watch = wd.Watchdog(0, wall=lambda: clocks.wall, cpu=lambda: clocks.cpu)
    watch.begin()
    clocks.step(wall=1e6, cpu=1e6)
    watch.tick()


def test_marking_a_call_reads_no_cpu_clock():
    # Reading the thread's CPU time is a system call (0.5 µs, more than a cheap check);
    # begin() runs around every detector call, so only the ticks read it.
    reads = []
    watch = wd.Watchdog(5.0, wall=lambda: 1000.0, cpu=lambda: reads.append(1) or 40.0)
    reads.clear()
    for _ in range(1000):
        watch.begin()
        watch.end()
    assert reads == []


def test_cpu_used_before_the_call_between_two_ticks_is_not_the_calls():
    clocks = Clocks()
    watch = watchdog(clocks)  # its clocks are read at 1000 s wall, 40 s CPU: the last tick
    clocks.step(wall=0.2, cpu=0.2)  # the harness computes, then the call begins
    watch.begin()
    clocks.step(wall=4.9, cpu=4.9)
    watch.tick()  # 4.9 s of the call's own, not 5.1
    clocks.step(wall=0.2, cpu=0.2)
    with pytest.raises(wd.CheckTimeout):
        watch.tick()  # 5.1 s


def test_a_call_is_interrupted_at_most_one_tick_late_never_early():
    # Off the CPU before the call began, the thread may still have computed then for all the
    # watchdog knows: the first tick charges the call the least it can have used.
    clocks = Clocks()
    watch = watchdog(clocks)
    clocks.step(wall=0.2)  # off the CPU
    watch.begin()
    clocks.step(wall=5.1, cpu=5.1)
    watch.tick()  # known: at least 4.9 s
    clocks.step(wall=0.25, cpu=0.25)  # the next tick
    with pytest.raises(wd.CheckTimeout):
        watch.tick()
