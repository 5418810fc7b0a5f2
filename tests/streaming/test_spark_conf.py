"""Spark's own configuration wins over flinkwatch's settings, except what detection needs."""

from __future__ import annotations

from pathlib import Path

from streaming.spark_conf import REQUIRED, defaults_file, merge, submit_args_conf, users_conf

OURS = {
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.ansi.enabled": "false",
    "spark.ui.enabled": "true",
    "spark.jars": "/stack/kafka.jar,/stack/clients.jar",
}


def test_a_setting_the_user_gave_spark_replaces_flinkwatchs_and_is_reported() -> None:
    merged = merge(OURS, {"spark.sql.shuffle.partitions": "8", "spark.executor.cores": "4"})
    assert merged.settings["spark.sql.shuffle.partitions"] == "8"
    assert merged.settings["spark.executor.cores"] == "4"  # one flinkwatch never sets
    assert merged.replaced == {"spark.sql.shuffle.partitions": ("2", "8")}
    assert merged.kept == {}


def test_what_detection_needs_is_kept_and_the_reason_given() -> None:
    merged = merge(OURS, {"spark.sql.ansi.enabled": "true"})
    assert merged.settings["spark.sql.ansi.enabled"] == "false"
    assert merged.kept == {"spark.sql.ansi.enabled": ("true", REQUIRED["spark.sql.ansi.enabled"])}
    assert merged.replaced == {}


def test_the_users_jars_and_the_connectors_are_both_kept_once() -> None:
    merged = merge(OURS, {"spark.jars": "/mine/udf.jar,/stack/kafka.jar"})
    assert merged.settings["spark.jars"].split(",") == [
        "/mine/udf.jar",
        "/stack/kafka.jar",
        "/stack/clients.jar",
    ]


def test_nothing_set_by_the_user_leaves_flinkwatchs_settings_as_they_are() -> None:
    merged = merge(OURS, {})
    assert merged.settings == OURS and not merged.replaced and not merged.kept


def test_spark_defaults_conf_is_read_as_java_properties(tmp_path: Path) -> None:
    f = tmp_path / "spark-defaults.conf"
    f.write_text(
        "# a comment\n"
        "! another\n"
        "spark.sql.shuffle.partitions   8\n"
        "spark.executor.memory=4g\n"
        "spark.eventLog.dir: hdfs://nn/logs\n"
        "not.spark.key 1\n"
        "\n"
        "spark.lonely\n",
        encoding="utf-8",
    )
    assert defaults_file(f) == {
        "spark.sql.shuffle.partitions": "8",
        "spark.executor.memory": "4g",
        "spark.eventLog.dir": "hdfs://nn/logs",
    }
    assert defaults_file(tmp_path / "missing.conf") == {}


def test_the_conf_pairs_of_pyspark_submit_args_are_read() -> None:
    args = "--master local[4] --conf spark.a=1 --conf=spark.b=x=y -c spark.c=3 --conf other=4 pyspark-shell"
    assert submit_args_conf(args) == {"spark.a": "1", "spark.b": "x=y", "spark.c": "3"}
    assert submit_args_conf("--conf 'unterminated") == {}


def test_submit_args_win_over_the_defaults_file_which_comes_from_spark_conf_dir(
    tmp_path: Path,
) -> None:
    (tmp_path / "spark-defaults.conf").write_text("spark.a 1\nspark.b 2\n", encoding="utf-8")
    env = {
        "SPARK_CONF_DIR": str(tmp_path),
        "SPARK_HOME": "/nowhere",
        "PYSPARK_SUBMIT_ARGS": "--conf spark.b=3 pyspark-shell",
    }
    assert users_conf(env) == {"spark.a": "1", "spark.b": "3"}
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "spark-defaults.conf").write_text("spark.c 4\n", encoding="utf-8")
    assert users_conf({"SPARK_HOME": str(home)}) == {"spark.c": "4"}


def test_under_spark_submit_the_jvms_spark_properties_are_the_whole_answer(
    tmp_path: Path,
) -> None:
    (tmp_path / "spark-defaults.conf").write_text("spark.a 1\n", encoding="utf-8")
    submitted = {"spark.master": "k8s://api", "spark.b": "2", "java.version": "17"}
    got = users_conf({"SPARK_CONF_DIR": str(tmp_path)}, submitted=submitted)
    assert got == {"spark.master": "k8s://api", "spark.b": "2"}


def test_the_users_driver_class_path_and_ours_are_both_kept() -> None:
    ours = {**OURS, "spark.driver.extraClassPath": "/stack/fs.jar"}
    merged = merge(ours, {"spark.driver.extraClassPath": "/mine/a.jar:/mine/b.jar"})
    assert merged.settings["spark.driver.extraClassPath"] == "/mine/a.jar:/mine/b.jar:/stack/fs.jar"
    assert merged.replaced == {}
