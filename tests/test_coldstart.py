"""Cold start (issue 33, the first second): numpy frames while the kernels compile in a background
process (skeletal.playback.coldstart, skeletal.playback.numpy_frame). Nothing here depends on timing: the
numpy path is forced on and compared with the compiled one, and the switch to the compiled kernels
is checked after waiting on the child explicitly."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import skeletal
from skeletal.playback import coldstart as _coldstart
from skeletal.playback import kernels as K
from skeletal.playback import numpy_frame
from tests.fixtures import models
from tests.fixtures.gltf_extensions import morph_model
from tests.fixtures.shared_assets import ASSETS


class _Never:
    """A background compile that never finishes (the numpy frames go on for the whole test) and has
    cached the kernels named in ``loaded``."""

    requests: list = []
    ok = False

    def __init__(self, loaded=()):
        self.loaded = set(loaded)

    def finished(self):
        return False

    def wait(self, timeout=None):
        return False


@pytest.fixture
def fallback(monkeypatch):
    """Numpy frames on, kernels reported missing from the cache, no child process started."""
    monkeypatch.setenv(_coldstart.ENV_OFF, "0")
    monkeypatch.setattr(_coldstart, "_cached", lambda reqs, names: False)
    monkeypatch.setattr(_coldstart, "_background", lambda reqs: _Never())


def _compiled(asset):
    player = skeletal.Player(asset)
    assert player.mixer._cold is False
    return player


def _same(a, b, tol=1e-12):
    """Every output and state array of two players equal to ``tol`` (scaled by the values' size)."""
    for name in ("local_pose", "world", "palettes", "morph_weights", "fs"):
        x, y = getattr(a.mixer, name), getattr(b.mixer, name)
        assert x.shape == y.shape, name
        finite = np.isfinite(x)
        assert (finite == np.isfinite(y)).all(), name
        scale = max(1.0, float(np.abs(x[finite]).max(initial=0.0)))
        np.testing.assert_allclose(x[finite], y[finite], rtol=0, atol=tol * scale, err_msg=name)
    np.testing.assert_array_equal(a.mixer.ist, b.mixer.ist)
    np.testing.assert_allclose(a.node_world, b.node_world, rtol=0, atol=tol * max(1.0, np.abs(a.node_world).max()))
    assert a.events() == b.events()


def _script(a, b, names):
    """The same calls on both players, outputs compared after each; the numpy player must stay numpy."""
    first, second = names[0], names[min(1, len(names) - 1)]
    steps = [("play", (first,), {}), *[("update", (1 / 60,), {})] * 12,
             ("crossfade", (second, 0.25), {}), *[("update", (0.037,), {})] * 12,
             ("play", (first,), {"loop": "pingpong", "speed": -1.3, "weight": 0.6}),
             *[("update", (0.05,), {})] * 30,
             ("stop", (second,), {"fade": 0.2}), *[("update", (0.03,), {})] * 10,
             ("play", (second,), {"loop": "once", "restart": True}), *[("update", (0.2,), {})] * 12]
    for name, args, kwargs in steps:
        getattr(a, name)(*args, **kwargs)
        getattr(b, name)(*args, **kwargs)
        _same(a, b)
    assert b.mixer.frame is None and isinstance(b.mixer._cold, _Never)
    assert b.mixer._blends == a.mixer._blends  # (the kernel it switches to: with blending after a crossfade)


def _demo():
    from skeletal.demo import demo_asset

    return demo_asset()


def _fixture(name, tmp_path):
    if name == "morph":
        return skeletal.load(morph_model(tmp_path / "morph.glb"))
    return skeletal.load(models.build(name, tmp_path))


@pytest.mark.parametrize("name", ["demo", "cubic_spline_arm", "morph", "orphan_joint_root", "sparse_and_quantized"])
def test_numpy_frames_equal_the_compiled_ones(name, tmp_path, fallback, monkeypatch):
    """Plays, crossfades (CUBICSPLINE to STEP on the arm), ping-pong backwards at part weight, a fade
    out, a once clip to its end (events): the numpy frames equal the compiled update's to 1e-12."""
    asset = _demo() if name == "demo" else _fixture(name, tmp_path)
    monkeypatch.setenv(_coldstart.ENV_OFF, "1")
    a = _compiled(asset)
    monkeypatch.setenv(_coldstart.ENV_OFF, "0")
    b = skeletal.Player(asset)
    assert isinstance(b.mixer._cold, _Never)
    _script(a, b, [c.name for c in asset.clips])


def test_numpy_frames_on_soldier(fallback, monkeypatch):
    path = ASSETS / "Soldier.glb"
    if not path.is_file():
        pytest.skip(f"{path} is not there (the shared assets)")
    asset = skeletal.load(path)
    monkeypatch.setenv(_coldstart.ENV_OFF, "1")
    a = _compiled(asset)
    monkeypatch.setenv(_coldstart.ENV_OFF, "0")
    _script(a, skeletal.Player(asset), ["Walk", "Run"])


def test_masked_layer_and_a_mixer_of_three(fallback, monkeypatch):
    """An upper-body layer with a soft mask over a crossfade, and three instances at other times."""
    asset = _demo()
    names = [c.name for c in asset.clips]
    joint = asset.rig.names[len(asset.rig.names) // 2]
    players = []
    for off in ("1", "0"):
        monkeypatch.setenv(_coldstart.ENV_OFF, off)
        p = skeletal.Player(asset)
        p.play(names[0])
        p.add_layer("upper", weight=0.7, mask={joint: 0.5})
        p.play(names[-1], layer="upper")
        players.append(p)
    for _ in range(20):
        for p in players:
            p.update(1 / 30)
        _same(*players)
    assert players[1].mixer.frame is None

    mixers = []
    for off in ("1", "0"):
        monkeypatch.setenv(_coldstart.ENV_OFF, off)
        m = skeletal.Mixer(asset, 3)
        m.play(names[0], offset=np.array([0.0, 0.3, 0.7]))
        m.crossfade(names[-1], 0.4, instances=[1])
        mixers.append(m)
    assert mixers[0]._cold is False and isinstance(mixers[1]._cold, _Never)
    for _ in range(15):
        for m in mixers:
            m.update(0.05)
        for name in ("local_pose", "world", "palettes"):
            np.testing.assert_allclose(getattr(mixers[0], name), getattr(mixers[1], name), rtol=0, atol=1e-12)


def test_what_the_numpy_frame_does_not_cover_compiles_as_before(fallback):
    asset = _demo()
    assert _coldstart.enabled()
    assert skeletal.Player(asset, dtype=np.float32).mixer._cold is False
    p = skeletal.Player(asset)
    assert isinstance(p.mixer._cold, _Never) and numpy_frame.covers(p.mixer)
    p.play(asset.clips[0].name)
    p.update(1 / 60)
    chain = asset.rig.names[1:4]
    p.add_ik("reach", chain=chain, target=(0.1, 1.0, 0.3))  # IK: the compiled path from now on
    p.update(1 / 60)
    assert p.mixer._cold is False and p.mixer.frame is not None
    assert not numpy_frame.covers(skeletal.Crowd(asset, 4))
    assert skeletal.Mixer(asset, numpy_frame.MAX_INSTANCES + 1)._cold is False
    q = skeletal.Player(asset)
    names = [c.name for c in asset.clips]
    q.blend_space_1d([(names[0], 0.0), (names[-1], 1.0)], parameter="speed")  # a controller
    q.update(1 / 60)
    assert q.mixer._cold is False and q.mixer.frame is not None
    r = skeletal.Player(asset)
    r.play(names[0])
    assert numpy_frame.covers(r.mixer)
    r.crossfade(names[-1], 0.3, blend="inertialize")  # the update kernel's inertialization stage
    assert not numpy_frame.covers(r.mixer)


def test_off_switch_and_unwritable_cache(monkeypatch):
    monkeypatch.setenv(_coldstart.ENV_OFF, "1")
    assert not _coldstart.enabled()
    assert skeletal.Player(_demo()).mixer._cold is False
    monkeypatch.setenv(_coldstart.ENV_OFF, "0")
    monkeypatch.setattr(_coldstart, "_cached", lambda reqs, names: False)
    monkeypatch.setattr(_coldstart, "_cache_writable", lambda reqs: False)
    started = []
    monkeypatch.setattr(_coldstart, "_background", lambda reqs: started.append(reqs))
    p = skeletal.Player(_demo())
    assert p.mixer._cold is False and p.mixer.frame is not None and not started


def test_a_child_that_cannot_start_leaves_the_in_process_compile(monkeypatch, tmp_path):
    monkeypatch.setenv(_coldstart.ENV_OFF, "0")
    monkeypatch.setattr(_coldstart, "_cached", lambda reqs, names: False)
    monkeypatch.setattr(_coldstart, "_child_command", lambda: [str(tmp_path / "no-such-python")])
    monkeypatch.setattr(_coldstart, "_running", {})
    p = skeletal.Player(_demo())
    assert p.mixer._cold is False and p.mixer.frame is not None


def test_a_failed_child_leaves_the_in_process_compile(monkeypatch):
    """The child exits 3: waiting says so, the process is reaped, the next update runs compiled."""
    monkeypatch.setenv(_coldstart.ENV_OFF, "0")
    monkeypatch.setattr(_coldstart, "_cached", lambda reqs, names: False)
    monkeypatch.setattr(_coldstart, "_child_command", lambda: [sys.executable, "-c", "import sys; sys.exit(3)"])
    monkeypatch.setattr(_coldstart, "_running", {})
    p = skeletal.Player(_demo())
    job = p.mixer._cold
    assert isinstance(job, _coldstart.Background)
    assert _coldstart.wait(p.mixer, 60) is False
    assert job.process.returncode == 3 and job.process.poll() == 3
    p.play(_demo().clips[0].name)
    p.update(1 / 60)
    assert p.mixer._cold is False and p.mixer.frame is not None


def test_the_child_caches_the_kernels_and_the_mixer_switches(monkeypatch):
    """A real child (its kernels are likely cached already by the suite: then it only loads them):
    frames are numpy until it is waited on, compiled after, with the same values as a compiled player."""
    monkeypatch.setenv(_coldstart.ENV_OFF, "0")
    monkeypatch.setattr(_coldstart, "_cached", lambda reqs, names: False)
    monkeypatch.setattr(_coldstart, "_running", {})
    asset = _demo()
    name = asset.clips[0].name
    p = skeletal.Player(asset)
    job = p.mixer._cold
    assert isinstance(job, _coldstart.Background)
    p.play(name)
    p.update(1 / 60)
    assert p.mixer.frame is None
    assert _coldstart.wait(p.mixer, 600), job.compiled
    assert job.process.returncode == 0
    order = ["new_playback_job", "advance_serial", "single_action", "update_serial"]
    assert [r[0] for r in job.requests] == job.compiled == order and job.loaded == set(order)
    p.update(1 / 60)
    assert p.mixer._cold is False and p.mixer.frame is not None and not p.mixer._blends  # one clip: no blending
    monkeypatch.setenv(_coldstart.ENV_OFF, "1")
    q = skeletal.Player(asset)
    q.play(name)
    q.update(1 / 60)
    q.update(1 / 60)
    _same(p, q)


def test_a_blend_before_the_blending_kernel_is_cached_goes_back_to_numpy(monkeypatch):
    """One character switches once the single-action kernel is cached; its first crossfade, while the
    blending kernel is still compiling, runs numpy frames until that is cached too; values as compiled."""
    monkeypatch.setenv(_coldstart.ENV_OFF, "0")
    job = _Never({"new_playback_job", "advance_serial"})
    monkeypatch.setattr(_coldstart, "_cached", lambda reqs, names: False)
    monkeypatch.setattr(_coldstart, "_background", lambda reqs: job)
    asset = _demo()
    names = [c.name for c in asset.clips]
    b = skeletal.Player(asset)
    monkeypatch.setenv(_coldstart.ENV_OFF, "1")
    a = _compiled(asset)
    monkeypatch.setenv(_coldstart.ENV_OFF, "0")
    for p in (a, b):
        p.play(names[0])
        p.update(0.1)
    assert b.mixer._cold is job and b.mixer.frame is None
    job.loaded.add("single_action")
    for p in (a, b):
        p.update(0.1)
    _same(a, b)
    assert b.mixer._cold is False and b.mixer.frame is not None and not b.mixer._blends
    for p in (a, b):
        p.crossfade(names[-1], 0.5)  # (the target starts at weight 0: the next update blends)
        p.update(0.05)
    _same(a, b)
    assert b.mixer._cold is job and b.mixer.frame is None and b.mixer._blends
    for _ in range(5):
        for p in (a, b):
            p.update(0.05)
        _same(a, b)
    assert b.mixer.frame is None
    job.loaded.add("update_serial")
    for _ in range(3):
        for p in (a, b):
            p.update(0.05)
        _same(a, b)
    assert b.mixer._cold is False and b.mixer.frame is not None


_FRESH = textwrap.dedent("""
    import json, sys, skeletal
    from skeletal.playback import coldstart as _coldstart
    from skeletal.demo import demo_asset
    asset = demo_asset()
    p = skeletal.Player(asset)
    p.play(asset.clips[0].name)
    p.update(1 / 60)
    cold = type(p.mixer._cold).__name__
    numpy_pose = p.mixer.palettes.copy()
    waited = _coldstart.wait(p.mixer, 600) if sys.argv[1] == "wait" else None
    p.update(0.0)
    print(json.dumps({"cold": cold, "waited": waited, "compiled": p.mixer.frame is not None,
                      "same": float(abs(p.mixer.palettes - numpy_pose).max())}))
""")


def test_fresh_cache_end_to_end(tmp_path):
    """A new process with an empty NUMBA_CACHE_DIR: numpy frames, the child writes the cache there, the
    switch after waiting; a second process on that cache runs compiled from its first frame."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), SKELETAL_QUIET_COMPILE="1")
    env[_coldstart.ENV_OFF] = "0"
    runs = []
    for mode in ("wait", "nowait"):
        out = subprocess.run([sys.executable, "-c", _FRESH, mode], env=env, capture_output=True, text=True,
                             timeout=900)
        assert out.returncode == 0, out.stderr[-2000:]
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert first["cold"] == "Background" and first["waited"] is True and first["compiled"]
    assert first["same"] < 1e-12
    assert any((tmp_path / "cache").rglob("*.nbi"))
    assert second["cold"] == "bool" and second["compiled"]


def test_numpy_advance_is_the_kernels_clock():
    """numpy_frame.advance runs the kernels' own per-action body: the same state after awkward steps."""
    asset = _demo()
    m = skeletal.Mixer(asset, 2)
    names = [c.name for c in asset.clips]
    m.play(names[0], loop="pingpong", repetitions=3)
    m.play(names[-1], layer=0, fade=0.3, speed=-2.0, loop="once")
    cs = m.clipset
    table = m._clip_tables()[0]
    fs_a, ist_a = m.fs.copy(), m.ist.copy()
    fs_b, ist_b = m.fs.copy(), m.ist.copy()
    for dt in (0.1, 0.7, -0.2, 2.5, 0.0, 1e-9, 3.3):
        K.advance(fs_a, ist_a, m.slot_clip, table, cs.duration, cs.marker_time, dt)
        numpy_frame.advance(fs_b, ist_b, m.slot_clip, table, cs.duration, cs.marker_time, dt)
        np.testing.assert_array_equal(fs_a, fs_b)
        np.testing.assert_array_equal(ist_a, ist_b)
