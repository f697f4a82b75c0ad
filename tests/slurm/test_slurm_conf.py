"""slurm.conf rendering (trainworks.slurm.conf): pure, no daemons."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainworks.slurm.conf import (
    ClusterDef,
    ClusterLayout,
    NodeDef,
    PartitionDef,
    canonical_key,
    compact_hostlist,
    render_scripts,
    render_slurm_conf,
)

BASE = Path("/srv/clusters/c1")


def _cluster(**changes: object) -> ClusterDef:
    fields: dict[str, object] = {
        "cluster_name": "c1",
        "base_dir": BASE,
        "controller_port": 21000,
        "nodes": (
            NodeDef("c1cpu0", 21001, 4, 2000),
            NodeDef("c1cpu1", 21002, 4, 2000, features=("cpu", "small")),
            NodeDef("c1gpu0", 21003, 8, 8000, extra={"Weight": "10"}),
        ),
        "partitions": (
            PartitionDef("cpu", ("c1cpu0", "c1cpu1"), True),
            PartitionDef("gpu", ("c1gpu0",), False, extra={"MaxTime": "60", "PriorityTier": "2"}),
        ),
    }
    fields.update(changes)
    return ClusterDef(**fields)  # type: ignore[arg-type]


def _lines(conf: str, prefix: str) -> list[str]:
    return [line for line in conf.splitlines() if line.startswith(prefix)]


def _settings(conf: str) -> dict[str, str]:
    """Global Key=Value lines (not NodeName/PartitionName lines) as a dict."""
    out: dict[str, str] = {}
    for line in conf.splitlines():
        if line.startswith("#") or line.startswith(("NodeName=", "PartitionName=")):
            continue
        key, _, value = line.partition("=")
        assert key not in out, f"{key} rendered twice"
        out[key] = value
    return out


def test_defaults_follow_the_local_recipe() -> None:
    conf = render_slurm_conf(_cluster(), hostname="vm")
    s = _settings(conf)
    lay = ClusterLayout(BASE)
    assert s["ClusterName"] == "c1"
    assert s["SlurmctldHost"] == "vm(127.0.0.1)"
    assert s["SlurmctldPort"] == "21000"
    assert s["AuthType"] == "auth/munge"
    assert s["AuthInfo"] == f"socket={lay.munge_socket}"
    assert s["StateSaveLocation"] == str(lay.state)
    assert s["SlurmdSpoolDir"] == f"{BASE}/spool/%n"
    assert s["SlurmctldPidFile"] == f"{BASE}/run/slurmctld.pid"
    assert s["SlurmdPidFile"] == f"{BASE}/run/slurmd-%n.pid"
    assert s["SlurmdLogFile"] == f"{BASE}/log/slurmd-%n.log"
    assert s["ProctrackType"] == "proctrack/linuxproc"
    assert s["TaskPlugin"] == "task/none"
    assert s["SelectType"] == "select/cons_tres"
    assert s["SelectTypeParameters"] == "CR_CPU"
    assert s["SchedulerType"] == "sched/backfill"
    assert s["SchedulerParameters"] == "bf_interval=1"
    assert s["SlurmdParameters"] == "config_overrides"
    assert (s["ReturnToService"], s["MinJobAge"], s["KillWait"]) == ("2", "300", "5")
    # nothing of prolog/epilog or power saving without scripts or dynamic nodes
    for key in ("Prolog", "Epilog", "ResumeProgram", "SuspendProgram", "SuspendTime", "SuspendExcNodes"):
        assert key not in s


def test_one_node_line_per_node() -> None:
    conf = render_slurm_conf(_cluster(), hostname="vm")
    assert _lines(conf, "NodeName=") == [
        "NodeName=c1cpu0 NodeHostname=vm NodeAddr=127.0.0.1 Port=21001 CPUs=4 RealMemory=2000 State=UNKNOWN",
        "NodeName=c1cpu1 NodeHostname=vm NodeAddr=127.0.0.1 Port=21002 CPUs=4 RealMemory=2000 "
        "Features=cpu,small State=UNKNOWN",
        "NodeName=c1gpu0 NodeHostname=vm NodeAddr=127.0.0.1 Port=21003 CPUs=8 RealMemory=8000 State=UNKNOWN "
        "Weight=10",
    ]


def test_node_extra_replaces_a_rendered_pair() -> None:
    conf = render_slurm_conf(
        _cluster(
            nodes=(NodeDef("n1", 21001, 2, 1000, extra={"real_memory": "1500", "Gres": "gpu:1"}),),
            partitions=(PartitionDef("p", ("n1",), True),),
        ),
        hostname="vm",
    )
    assert _lines(conf, "NodeName=") == [
        "NodeName=n1 NodeHostname=vm NodeAddr=127.0.0.1 Port=21001 CPUs=2 real_memory=1500 State=UNKNOWN "
        "Gres=gpu:1"
    ]


def test_partitions_default_and_extra_pairs() -> None:
    conf = render_slurm_conf(_cluster(), hostname="vm")
    assert _lines(conf, "PartitionName=") == [
        "PartitionName=cpu Nodes=c1cpu[0-1] Default=YES MaxTime=INFINITE State=UP",
        "PartitionName=gpu Nodes=c1gpu0 Default=NO MaxTime=60 State=UP PriorityTier=2",
    ]


def test_config_overrides_defaults_case_and_underscore_insensitively() -> None:
    conf = render_slurm_conf(
        _cluster(
            config={
                "scheduler_parameters": "bf_interval=5,bf_continue",
                "KILLWAIT": "30",
                "PriorityWeightAge": "1000",
            }
        ),
        hostname="vm",
    )
    s = _settings(conf)
    assert s["scheduler_parameters"] == "bf_interval=5,bf_continue"
    assert s["KILLWAIT"] == "30"
    assert s["PriorityWeightAge"] == "1000"
    assert "SchedulerParameters" not in s and "KillWait" not in s
    # a replaced default keeps its place; new keys come after the defaults, before the node lines
    lines = conf.splitlines()
    assert lines.index("KILLWAIT=30") < lines.index("SlurmdTimeout=60")
    assert lines.index("PriorityWeightAge=1000") < lines.index(_lines(conf, "NodeName=")[0])


def test_config_values_are_written_literally_but_not_across_lines() -> None:
    conf = render_slurm_conf(
        _cluster(config={"SlurmctldParameters": "enable_configless, x=y"}), hostname="vm"
    )
    assert "SlurmctldParameters=enable_configless, x=y" in conf.splitlines()
    with pytest.raises(ValueError):
        render_slurm_conf(_cluster(config={"KillWait": "5\nSlurmUser=nobody"}))
    with pytest.raises(ValueError):
        render_slurm_conf(_cluster(config={"KillWait": "5", "kill_wait": "6"}))


def test_prolog_and_epilog_point_at_wrappers_that_run_the_scripts_in_order() -> None:
    cluster = _cluster(prolog_scripts=("echo one", "#!/bin/sh\necho two"), epilog_scripts=("echo bye",))
    s = _settings(render_slurm_conf(cluster, hostname="vm"))
    lay = ClusterLayout(BASE)
    assert s["Prolog"] == str(lay.prolog)
    assert s["Epilog"] == str(lay.epilog)
    assert s["PrologFlags"] == "Alloc"
    files = render_scripts(cluster)
    first, second = lay.prolog_dir / "000.sh", lay.prolog_dir / "001.sh"
    assert files[first] == "#!/bin/bash\necho one"
    assert files[second] == "#!/bin/sh\necho two"  # an own shebang is kept
    wrapper = files[lay.prolog]
    assert wrapper.index(str(first)) < wrapper.index(str(second))
    assert 'TRAINWORKS_NODE_DISK=/srv/clusters/c1/nodes/"$SLURMD_NODENAME"/disk' in wrapper
    assert files[lay.epilog_dir / "000.sh"] == "#!/bin/bash\necho bye"
    assert lay.resume_program not in files


def test_power_save_lines_only_with_dynamic_nodes() -> None:
    static = _settings(render_slurm_conf(_cluster(), hostname="vm"))
    assert not {"ResumeProgram", "SuspendProgram", "SuspendTime", "SuspendExcNodes"} & static.keys()

    nodes = (
        NodeDef("c1cpu0", 21001, 4, 2000),
        NodeDef("c1cpu1", 21002, 4, 2000),
        NodeDef("c1dyn0", 21003, 4, 2000, dynamic=True),
        NodeDef("c1dyn1", 21004, 4, 2000, dynamic=True),
    )
    cluster = _cluster(
        nodes=nodes,
        partitions=(PartitionDef("all", tuple(n.name for n in nodes), True),),
        suspend_time=7,
    )
    conf = render_slurm_conf(cluster, hostname="vm")
    s = _settings(conf)
    lay = ClusterLayout(BASE)
    assert s["ResumeProgram"] == str(lay.resume_program)
    assert s["SuspendProgram"] == str(lay.suspend_program)
    assert s["SuspendTime"] == "7"
    assert s["SuspendExcNodes"] == "c1cpu[0-1]"  # SuspendTime is global: keep static nodes up
    assert "idle_on_node_suspend" in s["SlurmctldParameters"]
    assert s["PrivateData"] == "cloud"
    assert [line.endswith("State=CLOUD") for line in _lines(conf, "NodeName=")] == [False, False, True, True]
    assert _lines(conf, "PartitionName=") == [
        "PartitionName=all Nodes=c1cpu[0-1],c1dyn[0-1] Default=YES MaxTime=INFINITE State=UP"
    ]
    files = render_scripts(cluster)
    assert "slurmd -b -f" in files[lay.resume_program]
    assert "scontrol show hostnames" in files[lay.suspend_program]


def test_invalid_clusters_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown nodes"):
        render_slurm_conf(_cluster(partitions=(PartitionDef("p", ("nope",), True),)))
    with pytest.raises(ValueError, match="at most one"):
        render_slurm_conf(
            _cluster(partitions=(PartitionDef("a", ("c1cpu0",), True), PartitionDef("b", ("c1cpu1",), True)))
        )
    with pytest.raises(ValueError, match="used twice"):
        render_slurm_conf(
            _cluster(nodes=(NodeDef("n", 21001, 1, 100), NodeDef("n", 21002, 1, 100)), partitions=())
        )
    with pytest.raises(ValueError, match="distinct ports"):
        render_slurm_conf(_cluster(nodes=(NodeDef("n", 21000, 1, 100),), partitions=()))
    with pytest.raises(ValueError, match="lowercase"):
        render_slurm_conf(_cluster(cluster_name="C1"))
    with pytest.raises(ValueError, match="too long for unix socket paths"):
        render_slurm_conf(_cluster(base_dir=Path("/srv") / ("x" * 70)))


def test_compact_hostlist() -> None:
    assert compact_hostlist(["c1", "c2", "c3", "g0"]) == "c[1-3],g0"
    assert compact_hostlist(["n1", "n3", "n4", "n5"]) == "n[1,3-5]"
    assert compact_hostlist(["n9", "n10", "n11"]) == "n9,n[10-11]"
    assert compact_hostlist(["n08", "n09"]) == "n[08-09]"
    assert compact_hostlist(["login", "c1cpu0"]) == "login,c1cpu0"
    assert compact_hostlist([]) == ""


def test_canonical_key() -> None:
    assert (
        canonical_key("Scheduler_Parameters") == canonical_key("SCHEDULERPARAMETERS") == "schedulerparameters"
    )
