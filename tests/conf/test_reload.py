"""Live reload of the config file (pure Python, no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conf import AppConfig, ConfigError, load_config
from conf.reload import ConfigWatcher
from tests.conf.helpers import write


def settled(w: ConfigWatcher) -> AppConfig | None:
    """Two polls: a changed file is applied only when the second read agrees."""
    assert w.poll() is None
    return w.poll()


def test_watcher_applies_a_valid_edit_once_and_compares_content_not_mtime(tmp_path) -> None:
    f = write(tmp_path / "c.yaml", "detectors:\n  checkpoint_failures: {min_expired: 3}\n")
    w = ConfigWatcher(f, load_config(f))
    assert w.poll() is None  # unchanged
    write(f, "detectors:\n  checkpoint_failures: {min_expired: 4}\n")
    new = settled(w)
    assert new is not None and new.detector_params()["checkpoint_failures"].min_expired == 4
    assert w.poll() is None  # the same content is not applied twice
    assert w.stats.succeeded == 1 and w.stats.active_hash


def test_watcher_rejects_an_invalid_edit_and_keeps_the_running_config(tmp_path, caplog) -> None:
    f = write(tmp_path / "c.yaml", "detectors:\n  checkpoint_failures: {min_expired: 3}\n")
    w = ConfigWatcher(f, load_config(f))
    good_hash = w.stats.active_hash
    write(f, "detectors:\n  checkpoint_failures: {min_expired: zero}\n")
    assert settled(w) is None
    assert w.stats.failed == 1
    assert "c.yaml" in (w.stats.last_error or "")
    assert "detectors.checkpoint_failures.min_expired" in (w.stats.last_error or "")
    assert w.current.detector_params()["checkpoint_failures"].min_expired == 3
    assert w.stats.active_hash == good_hash
    assert "config reload rejected" in caplog.text
    # Fixing the file applies it.
    write(f, "detectors:\n  checkpoint_failures: {min_expired: 5}\n")
    assert settled(w) is not None and w.stats.last_error is None


def test_restart_only_fields_are_kept_and_reported(tmp_path) -> None:
    f = write(tmp_path / "c.yaml", "kafka: {logs_topic: a}\n")
    w = ConfigWatcher(f, load_config(f))
    write(f, "kafka: {logs_topic: b}\nspark: {trigger_interval_s: 2}\n")
    new = settled(w)
    assert new is not None
    assert new.kafka.logs_topic == "a"
    assert new.spark.trigger_interval_s == 2
    assert w.stats.ignored_fields == ["kafka"]


def test_a_watcher_with_nothing_fixed_applies_every_setting(tmp_path) -> None:
    # A replay's (``replay --watch``): no running query or checkpoint holds the settings.
    f = write(tmp_path / "c.yaml", "spark: {state_shards: 8}\n")
    w = ConfigWatcher(f, load_config(f), fixed=())
    write(f, "spark: {state_shards: 4}\n")
    new = settled(w)
    assert new is not None and new.spark.state_shards == 4
    assert w.stats.ignored_fields == []


def test_sighup_forces_a_reread_of_unchanged_content(tmp_path) -> None:
    f = write(tmp_path / "c.yaml", "detectors:\n  checkpoint_failures: {min_expired: 3}\n")
    w = ConfigWatcher(f, load_config(f))
    assert w.poll(force=True) is None  # valid, but nothing differs
    assert w.stats.succeeded == 1


def test_a_vanished_file_is_reported_once_not_on_every_poll(tmp_path) -> None:
    f = write(tmp_path / "c.yaml", "detectors:\n  checkpoint_failures: {min_expired: 3}\n")
    w = ConfigWatcher(f, load_config(f))
    f.unlink()
    assert [w.poll(), w.poll(), w.poll()] == [None, None, None]
    assert w.stats.failed == 1


def test_disabling_every_detector_is_rejected(tmp_path) -> None:
    from detectors import REGISTRY

    text = "detectors:\n" + "".join(f"  {n}: {{enabled: false}}\n" for n in REGISTRY)
    with pytest.raises(ConfigError, match="every detector is disabled"):
        load_config(write(tmp_path / "all_disabled.yaml", text))


class ConfigMapVolume:
    """A directory laid out the way the kubelet mounts a ConfigMap, updated the way it does.

    ``<dir>/flinkwatch.yaml -> ..data/flinkwatch.yaml`` and ``..data -> ..<timestamp>``; an
    update writes a new ``..<timestamp>`` directory, points a temporary link at it, renames
    that link over ``..data`` (atomic) and deletes the old directory. The path the job reads
    never changes, and the new file may carry any mtime (here: exactly the old one).
    """

    def __init__(self, root: Path, key: str = "flinkwatch.yaml") -> None:
        self.root = root
        self.key = key
        self.generation = 0
        self.mtime_ns: int | None = None
        root.mkdir()
        self._publish("")
        (root / key).symlink_to(Path("..data") / key)

    @property
    def path(self) -> Path:
        return self.root / self.key

    def update(self, text: str) -> None:
        self._publish(text)

    def _publish(self, text: str) -> None:
        import os
        import shutil

        self.generation += 1
        stamp = f"..2026_11_22_08_{self.generation:02d}_00.{1000 + self.generation}"
        (self.root / stamp).mkdir()
        new = self.root / stamp / self.key
        new.write_text(text)
        if self.mtime_ns is None:
            self.mtime_ns = new.stat().st_mtime_ns
        os.utime(new, ns=(self.mtime_ns, self.mtime_ns))
        old = (self.root / "..data").readlink() if (self.root / "..data").is_symlink() else None
        (self.root / "..data_tmp").symlink_to(stamp)
        os.replace(self.root / "..data_tmp", self.root / "..data")
        if old is not None:
            shutil.rmtree(self.root / old)


def test_watcher_follows_a_configmap_symlink_swap_with_an_unchanged_mtime(tmp_path) -> None:
    vol = ConfigMapVolume(tmp_path / "config")
    vol.update("detectors:\n  checkpoint_failures: {min_expired: 3}\n")
    link_before = vol.path.lstat()
    w = ConfigWatcher(vol.path, load_config(vol.path))
    mtime = vol.path.stat().st_mtime_ns

    vol.update("detectors:\n  checkpoint_failures: {min_expired: 4}\n")  # same size, same mtime
    assert vol.path.stat().st_mtime_ns == mtime
    assert vol.path.lstat().st_ino == link_before.st_ino  # the mounted path itself is untouched
    new = settled(w)
    assert new is not None
    assert new.detector_params()["checkpoint_failures"].min_expired == 4
    assert w.poll() is None  # applied once

    # An invalid edit arrives the same way: rejected, the running config stays.
    applied_hash = w.stats.active_hash
    vol.update("detectors:\n  checkpoint_failures: {min_expired: -1}\n")
    assert settled(w) is None
    assert w.stats.failed == 1
    assert "detectors.checkpoint_failures.min_expired" in (w.stats.last_error or "")
    assert w.current.detector_params()["checkpoint_failures"].min_expired == 4
    assert w.stats.active_hash == applied_hash

    # The fix after it is applied.
    vol.update("detectors:\n  checkpoint_failures: {min_expired: 6}\n")
    fixed = settled(w)
    assert fixed is not None and fixed.detector_params()["checkpoint_failures"].min_expired == 6
    assert [p.name for p in vol.root.iterdir() if p.name.startswith("..2026")] == [
        "..2026_11_22_08_05_00.1005"
    ]


SAVED = """detectors:
  checkpoint_failures: {min_expired: 3}
silences:
  - name: maintenance
    matchers: {job_name: "etl-.*"}
    starts_at: 2026-11-22T02:00:00Z
    ends_at: 2099-01-01T00:00:00Z
slack:
  channel: "#flink-alerts"
  routes:
    - {channel: "#flink-critical", severities: [critical]}
"""


def test_a_save_caught_half_way_is_not_applied(tmp_path, caplog) -> None:
    # Cut between two sections the file is valid YAML and a valid config, without the
    # silences and routes that were still to come.
    f = write(tmp_path / "c.yaml", SAVED)
    w = ConfigWatcher(f, load_config(f))
    cut = SAVED.replace("min_expired: 3", "min_expired: 4")[: SAVED.index("silences:")]
    write(f, cut)
    assert w.poll() is None  # seen once: maybe half a save
    write(f, SAVED.replace("min_expired: 3", "min_expired: 4"))
    assert w.poll() is None  # differs from the read before: still settling
    new = w.poll()
    assert new is not None
    assert new.detector_params()["checkpoint_failures"].min_expired == 4
    assert [s.name for s in new.silences] == ["maintenance"] and new.slack.routes
    assert w.stats.succeeded == 1 and w.stats.failed == 0
    assert "is gone" not in caplog.text


def test_a_section_that_vanishes_is_applied_with_a_warning(tmp_path, caplog) -> None:
    f = write(tmp_path / "c.yaml", SAVED)
    w = ConfigWatcher(f, load_config(f))
    write(f, SAVED[: SAVED.index("silences:")] + 'slack:\n  channel: "#flink-alerts"\n')
    new = settled(w)
    assert new is not None and new.silences == ()
    assert "section silences (1 entry) is gone" in caplog.text
    assert "section slack.routes (1 entry) is gone" in caplog.text


def test_sighup_reads_twice_and_waits_for_a_save_in_progress(tmp_path) -> None:
    f = write(tmp_path / "c.yaml", SAVED)
    done = SAVED.replace("min_expired: 3", "min_expired: 5")

    def finish_the_save(_s: float) -> None:
        write(f, done)

    w = ConfigWatcher(f, load_config(f), sleep=finish_the_save)
    write(f, done[: done.index("silences:")])
    assert w.poll(force=True) is None  # the two reads differ
    new = w.poll()  # the next poll agrees with the finished save
    assert new is not None and new.silences
    assert new.detector_params()["checkpoint_failures"].min_expired == 5


# --- what is read at all ----------------------------------------------------------------


def oversized(body: str) -> str:
    """``body`` padded with a YAML comment past the 1 MiB cap: valid YAML, and too large."""
    return body + "#" * ((1 << 20) + 1 - len(body)) + "\n"


def test_a_file_past_the_size_cap_is_refused_naming_it_and_the_running_config_stays(
    tmp_path, caplog
) -> None:
    f = write(tmp_path / "c.yaml", "detectors:\n  checkpoint_failures: {min_expired: 3}\n")
    w = ConfigWatcher(f, load_config(f))
    good_hash = w.stats.active_hash
    write(f, oversized("detectors:\n  checkpoint_failures: {min_expired: 4}\n"))
    assert [w.poll(), w.poll(), w.poll(force=True)] == [None, None, None]
    assert w.stats.failed == 1  # reported once, not on every poll
    error = w.stats.last_error or ""
    assert str(f) in error and "larger than 1,048,576 bytes" in error
    assert "keeping the running config" in error and "config reload rejected" in caplog.text
    assert w.current.detector_params()["checkpoint_failures"].min_expired == 3
    assert w.stats.active_hash == good_hash
    # A file back under the cap is applied as any edit.
    write(f, "detectors:\n  checkpoint_failures: {min_expired: 5}\n")
    new = settled(w)
    assert new is not None and new.detector_params()["checkpoint_failures"].min_expired == 5


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/urandom"])
def test_a_config_linked_to_an_endless_device_is_refused_without_reading_it(
    tmp_path, target: str
) -> None:
    # A ConfigMap-style symlink pointed at /dev/zero: read whole, it would fill the driver.
    f = write(tmp_path / "real.yaml", "detectors:\n  checkpoint_failures: {min_expired: 3}\n")
    link = tmp_path / "c.yaml"
    link.symlink_to(f)
    w = ConfigWatcher(link, load_config(link))
    link.unlink()
    link.symlink_to(target)
    assert w.poll() is None and w.poll() is None
    assert w.stats.failed == 1
    assert f"{link}: cannot read config: a character device" in (w.stats.last_error or "")
    assert w.current.detector_params()["checkpoint_failures"].min_expired == 3


def test_a_fifo_is_refused_rather_than_waited_on(tmp_path) -> None:
    import os

    f = write(tmp_path / "c.yaml", "detectors:\n  checkpoint_failures: {min_expired: 3}\n")
    w = ConfigWatcher(f, load_config(f))
    f.unlink()
    os.mkfifo(f)  # nobody writes: a blocking open would hang the driver's loop
    assert w.poll() is None
    assert "a FIFO, not a regular file" in (w.stats.last_error or "")


def test_load_config_refuses_an_oversized_file_at_start(tmp_path) -> None:
    f = write(tmp_path / "huge.yaml", oversized("cluster: prod\n"))
    with pytest.raises(ConfigError, match=r"huge\.yaml: cannot read config: larger than"):
        load_config(f)
    with pytest.raises(ConfigError, match="a character device"):
        load_config("/dev/zero")


def test_the_cap_is_exact(tmp_path) -> None:
    from conf import MAX_CONFIG_BYTES, read_config_file

    assert MAX_CONFIG_BYTES == 1 << 20  # docs/configuration.md says 1 MiB
    assert read_config_file(write(tmp_path / "edge.yaml", "x" * 10), limit=10) == b"x" * 10
    with pytest.raises(ConfigError, match="larger than 9 bytes"):
        read_config_file(tmp_path / "edge.yaml", limit=9)
