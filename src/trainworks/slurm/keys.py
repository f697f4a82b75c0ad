"""slurm.conf parameter names (Slurm 22.05) and which of them a training cluster's users may set.

`config` (global `Key=Value`), partition `config` (extra pairs on a `PartitionName=` line) and node-set
`config` (extra pairs on a `NodeName=` line) name slurm.conf parameters. Keys match ignoring case and
underscores, as the docs promise ("priority_weight_age" is PriorityWeightAge). The lists come from
slurm.conf(5) of Slurm 22.05.8 (its PARAMETERS, NODE CONFIGURATION and PARTITION CONFIGURATION sections) and
slurmdbd.conf(5) of the same release. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def _names(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# slurm.conf(5), PARAMETERS: every global parameter of Slurm 22.05.
SLURM_CONF_KEYS: tuple[str, ...] = _names(
    """
    AccountingStorageBackupHost AccountingStorageEnforce AccountingStorageExternalHost
    AccountingStorageHost AccountingStorageParameters AccountingStoragePass AccountingStoragePort
    AccountingStorageTRES AccountingStorageType AccountingStorageUser AccountingStoreFlags
    AcctGatherNodeFreq AcctGatherEnergyType AcctGatherInterconnectType AcctGatherFilesystemType
    AcctGatherProfileType AllowSpecResourcesUsage AuthAltTypes AuthAltParameters AuthInfo AuthType
    BackupAddr BackupController BatchStartTimeout BcastExclude BcastParameters BurstBufferType
    CliFilterPlugins ClusterName CommunicationParameters CompleteWait ControlAddr ControlMachine
    CoreSpecPlugin CpuFreqDef CpuFreqGovernors CredType DebugFlags DefCpuPerGPU DefMemPerCPU
    DefMemPerGPU DefMemPerNode DependencyParameters DisableRootJobs EioTimeout EnforcePartLimits
    Epilog EpilogMsgTime EpilogSlurmctld ExtSensorsFreq ExtSensorsType FairShareDampeningFactor
    FederationParameters FirstJobId GetEnvTimeout GpuFreqDef GresTypes GroupUpdateForce
    GroupUpdateTime HealthCheckInterval HealthCheckNodeState HealthCheckProgram InactiveLimit
    InteractiveStepOptions JobAcctGatherType JobAcctGatherFrequency JobAcctGatherParams JobCompHost
    JobCompLoc JobCompParams JobCompPass JobCompPort JobCompType JobCompUser JobContainerType
    JobFileAppend JobRequeue JobSubmitPlugins KillOnBadExit KillWait NodeFeaturesPlugins
    LaunchParameters LaunchType Licenses LogTimeFormat MailDomain MailProg MaxArraySize MaxDBDMsgs
    MaxJobCount MaxJobId MaxMemPerCPU MaxMemPerNode MaxNodeCount MaxStepCount MaxTasksPerNode
    MCSParameters MCSPlugin MessageTimeout MinJobAge MpiDefault MpiParams OverTimeLimit PluginDir
    PlugStackConfig PowerParameters PowerPlugin PreemptMode PreemptType PreemptExemptTime
    PrEpParameters PrEpPlugins PriorityCalcPeriod PriorityDecayHalfLife PriorityFavorSmall
    PriorityFlags PriorityMaxAge PriorityParameters PrioritySiteFactorParameters
    PrioritySiteFactorPlugin PriorityType PriorityUsageResetPeriod PriorityWeightAge
    PriorityWeightAssoc PriorityWeightFairshare PriorityWeightJobSize PriorityWeightPartition
    PriorityWeightQOS PriorityWeightTRES PrivateData ProctrackType Prolog PrologEpilogTimeout
    PrologFlags PrologSlurmctld PropagatePrioProcess PropagateResourceLimits
    PropagateResourceLimitsExcept RebootProgram ReconfigFlags RequeueExit RequeueExitHold
    ResumeFailProgram ResumeProgram ResumeRate ResumeTimeout ResvEpilog ResvOverRun ResvProlog
    ReturnToService RoutePlugin SchedulerParameters SchedulerTimeSlice SchedulerType ScronParameters
    SelectType SelectTypeParameters SlurmctldAddr SlurmctldDebug SlurmctldHost SlurmctldLogFile
    SlurmctldParameters SlurmctldPidFile SlurmctldPlugstack SlurmctldPort SlurmctldPrimaryOffProg
    SlurmctldPrimaryOnProg SlurmctldSyslogDebug SlurmctldTimeout SlurmdDebug SlurmdLogFile
    SlurmdParameters SlurmdPidFile SlurmdPort SlurmdSpoolDir SlurmdSyslogDebug SlurmdTimeout
    SlurmdUser SlurmSchedLogFile SlurmSchedLogLevel SlurmUser SrunEpilog SrunPortRange SrunProlog
    StateSaveLocation SuspendExcNodes SuspendExcParts SuspendProgram SuspendRate SuspendTime
    SuspendTimeout SwitchParameters SwitchType TaskEpilog TaskPlugin TaskPluginParam TaskProlog
    TCPTimeout TmpFS TopologyParam TopologyPlugin TrackWCKey TreeWidth UnkillableStepProgram
    UnkillableStepTimeout UsePAM VSizeFactor WaitTime X11Parameters
    """
)

# Keywords that start a line of their own (NODE, DOWN NODE, FRONTEND, NODESET and PARTITION CONFIGURATION).
LINE_KEYWORDS: tuple[str, ...] = ("NodeName", "DownNodes", "FrontendName", "NodeSet", "PartitionName")

# slurmdbd.conf(5) of 22.05, less the names slurm.conf also has (AuthType, DebugFlags, PrivateData, ...):
# these belong to the accounting daemon, which the service runs.
SLURMDBD_CONF_KEYS: tuple[str, ...] = _names(
    """
    AllowNoDefAcct AllResourcesAbsolute ArchiveDir ArchiveEvents ArchiveJobs ArchiveResvs
    ArchiveScript ArchiveSteps ArchiveSuspend ArchiveTXN ArchiveUsage CommitDelay DbdAddr
    DbdBackupHost DbdHost DbdPort DebugLevel DebugLevelSyslog DefaultQOS LogFile MaxQueryTimeRange
    Parameters PidFile PurgeEventAfter PurgeJobAfter PurgeResvAfter PurgeStepAfter PurgeSuspendAfter
    PurgeTXNAfter PurgeUsageAfter StorageBackupHost StorageHost StorageLoc StorageParameters
    StoragePass StoragePort StorageType StorageUser TrackSlurmctldDown
    """
)

# slurm.conf(5), PARTITION CONFIGURATION: the parameters of a `PartitionName=` line.
PARTITION_KEYS: tuple[str, ...] = _names(
    """
    AllocNodes AllowAccounts AllowGroups AllowQos Alternate CpuBind Default DefaultTime DefCpuPerGPU
    DefMemPerCPU DefMemPerGPU DefMemPerNode DenyAccounts DenyQos DisableRootJobs ExclusiveUser
    GraceTime Hidden LLN MaxCPUsPerNode MaxMemPerCPU MaxMemPerNode MaxNodes MaxTime MinNodes Nodes
    OverSubscribe OverTimeLimit PartitionName PreemptMode PriorityJobFactor PriorityTier QOS ReqResv
    ResumeTimeout RootOnly SelectTypeParameters Shared State SuspendTime SuspendTimeout
    TRESBillingWeights
    """
)

# slurm.conf(5), NODE CONFIGURATION: the parameters of a `NodeName=` line.
NODE_KEYS: tuple[str, ...] = _names(
    """
    NodeName NodeHostname NodeAddr BcastAddr Boards CoreSpecCount CoresPerSocket CpuBind CPUs
    CpuSpecList Features Gres MemSpecLimit Port Procs RealMemory Reason Sockets SocketsPerBoard
    State ThreadsPerCore TmpDisk Weight
    """
)

_DAEMONS = "the service runs the Slurm daemons and sets it"
_PROGRAMS = "the service runs its own program here to manage the nodes"
_ACCOUNTING = "the service runs the accounting storage and sets it"
_LINES = "the service writes the node and partition lines from node_pools, partitions and node_sets"

# Global keys users may not set, with the reason the error message gives.
_RESERVED: dict[str, str] = {
    # named by the docs
    "HealthCheckProgram": "the service runs its own node health checks",
    "HealthCheckInterval": "the service runs its own node health checks",
    "HealthCheckNodeState": "the service runs its own node health checks",
    "RequeueExit": "the service uses it to requeue jobs after node failures",
    "RequeueExitHold": "the service uses it to requeue jobs after node failures",
    "Prolog": "use prolog_bash_scripts; the service runs them through its own prolog",
    "Epilog": "use epilog_bash_scripts; the service runs them through its own epilog",
    "PrologSlurmctld": "the service owns the controller's prolog",
    "EpilogSlurmctld": "the service owns the controller's epilog",
    # what the service needs to run the cluster at all
    **dict.fromkeys(
        _names(
            """
            ClusterName SlurmctldHost ControlMachine ControlAddr BackupController BackupAddr
            SlurmctldAddr SlurmctldPort SlurmdPort AuthType AuthInfo AuthAltTypes
            AuthAltParameters CredType StateSaveLocation SlurmdSpoolDir SlurmctldPidFile
            SlurmdPidFile SlurmctldLogFile SlurmdLogFile SlurmSchedLogFile SlurmUser SlurmdUser
            PluginDir PlugStackConfig SlurmctldPlugstack ProctrackType TaskPlugin
            JobAcctGatherType SlurmdParameters SlurmctldParameters CommunicationParameters
            TreeWidth MaxNodeCount
            """
        ),
        _DAEMONS,
    ),
    # power saving scales the dynamic nodes (min_node_count < max_node_count)
    **dict.fromkeys(
        _names(
            """
            ResumeProgram SuspendProgram ResumeFailProgram RebootProgram SlurmctldPrimaryOnProg
            SlurmctldPrimaryOffProg ResumeRate SuspendRate ResumeTimeout SuspendTimeout
            SuspendExcNodes SuspendExcParts
            """
        ),
        _PROGRAMS,
    ),
    **dict.fromkeys(
        _names(
            """
            AccountingStorageType AccountingStorageHost AccountingStorageBackupHost
            AccountingStorageExternalHost AccountingStoragePort AccountingStoragePass
            AccountingStorageUser AccountingStorageParameters
            """
        ),
        _ACCOUNTING,
    ),
    **dict.fromkeys(LINE_KEYWORDS, _LINES),
    **dict.fromkeys(SLURMDBD_CONF_KEYS, "it is a slurmdbd.conf parameter, and the service runs slurmdbd"),
}
RESERVED_KEYS: frozenset[str] = frozenset(_RESERVED)

_PARTITION_RESERVED: dict[str, str] = {
    "Default": "use default_partition_id to choose the default partition",
    "Nodes": "use node_pool_ids to choose the partition's nodes",
    "PartitionName": "the partition's name is its id",
}
RESERVED_PARTITION_KEYS: frozenset[str] = frozenset(_PARTITION_RESERVED)

_NODE_RESERVED: dict[str, str] = {
    "NodeName": "the service names the nodes of each node pool",
    **dict.fromkeys(
        ("NodeAddr", "NodeHostname", "Port", "BcastAddr"), "the service sets the nodes' addresses"
    ),
    "State": "the service sets the nodes' state (dynamic nodes are powered up and down by the service)",
}
RESERVED_NODE_KEYS: frozenset[str] = frozenset(_NODE_RESERVED)

# The legacy slurmSpec.scheduling / slurmSpec.accounting fields (camelCase, as stored) and the slurm.conf keys
# they stand for; `config` supersedes them.
LEGACY_SCHEDULING_KEYS: dict[str, str] = {
    "priorityType": "PriorityType",
    "priorityWeightAge": "PriorityWeightAge",
    "priorityWeightAssoc": "PriorityWeightAssoc",
    "priorityWeightFairshare": "PriorityWeightFairshare",
    "priorityWeightJobSize": "PriorityWeightJobSize",
    "priorityWeightPartition": "PriorityWeightPartition",
    "priorityWeightQos": "PriorityWeightQOS",
    "priorityWeightTres": "PriorityWeightTRES",
    "preemptType": "PreemptType",
    "preemptMode": "PreemptMode",
    "preemptExemptTime": "PreemptExemptTime",
}
LEGACY_ACCOUNTING_KEYS: dict[str, str] = {"accountingStorageEnforce": "AccountingStorageEnforce"}


def _norm(name: str) -> str:
    return name.replace("_", "").lower()


def _index(names: Iterable[str]) -> dict[str, str]:
    return {_norm(n): n for n in names}


_GLOBAL_INDEX = _index((*SLURM_CONF_KEYS, *LINE_KEYWORDS, *SLURMDBD_CONF_KEYS))
_PARTITION_INDEX = _index(PARTITION_KEYS)
_NODE_INDEX = _index(NODE_KEYS)


def canonical_key(name: str) -> str | None:
    """The slurm.conf spelling of a global key, matching case- and underscore-insensitively; None if unknown.

    Line keywords (NodeName, PartitionName, ...) and slurmdbd.conf parameters are known here, so that they
    are refused as reserved rather than unknown."""
    return _GLOBAL_INDEX.get(_norm(name))


def canonical_partition_key(name: str) -> str | None:
    """The spelling of a `PartitionName=` line parameter; None if unknown."""
    return _PARTITION_INDEX.get(_norm(name))


def canonical_node_key(name: str) -> str | None:
    """The spelling of a `NodeName=` line parameter; None if unknown."""
    return _NODE_INDEX.get(_norm(name))


def reserved_reason(key: str) -> str | None:
    """Why users may not set this canonical global key, or None when they may."""
    return _RESERVED.get(key)


def reserved_partition_reason(key: str) -> str | None:
    return _PARTITION_RESERVED.get(key)


def reserved_node_reason(key: str) -> str | None:
    return _NODE_RESERVED.get(key)


def check_value(value: str) -> str | None:
    """Why a value cannot go into slurm.conf as given, or None. A line holds several `Key=Value` pairs
    separated by blanks, so a blank or a line break would smuggle in another pair (`1 Prolog=/x`): values are
    one token, or one double-quoted string for those that need blanks (InteractiveStepOptions)."""
    if any(c in value for c in "\n\r\0"):
        return "values must be on one line"
    if not value:
        return "values must not be empty; leave the key out to use Slurm's default"
    if value.startswith('"') and value.endswith('"') and len(value) >= 2:
        return None if '"' not in value[1:-1] else "a quoted value must not contain '\"'"
    if any(c.isspace() for c in value):
        return 'values must not contain blanks; put a value that needs them in double quotes ("...")'
    if '"' in value:
        return "'\"' may only enclose the whole value"
    return None


def legacy_config(slurm_spec: Mapping[str, Any]) -> dict[str, str]:
    """slurm.conf pairs for the legacy `scheduling` and `accounting` fields of a canonical (camelCase)
    slurmSpec, in field order; empty strings are unset fields and give no pair."""
    out: dict[str, str] = {}
    for section, keys in (("scheduling", LEGACY_SCHEDULING_KEYS), ("accounting", LEGACY_ACCOUNTING_KEYS)):
        values = slurm_spec.get(section) or {}
        for field, key in keys.items():
            value = values.get(field)
            if value not in (None, ""):
                out[key] = str(value)
    return out


__all__ = [
    "LEGACY_ACCOUNTING_KEYS",
    "LEGACY_SCHEDULING_KEYS",
    "LINE_KEYWORDS",
    "NODE_KEYS",
    "PARTITION_KEYS",
    "RESERVED_KEYS",
    "RESERVED_NODE_KEYS",
    "RESERVED_PARTITION_KEYS",
    "SLURMDBD_CONF_KEYS",
    "SLURM_CONF_KEYS",
    "canonical_key",
    "canonical_node_key",
    "canonical_partition_key",
    "check_value",
    "legacy_config",
    "reserved_node_reason",
    "reserved_partition_reason",
    "reserved_reason",
]
