"""What the numbers in a failure line mean, so the verdict says it in words: NVIDIA's Xid codes (the driver's
GPU fault events), the status codes of an InfiniBand work completion (what `NET/IB : Got completion from peer …
with error N` / `status=N` carries) and NCCL's result codes (the `-> N` of NCCL's error-return trail).

Data, read by signatures whose `detail` names a table (signatures.yaml). Sources:
- Xid: NVIDIA's Xid catalogue, docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html (description column;
  "hardware" marks the codes whose immediate resolution there is a reset, a drain or support, not the application);
- ibv_wc_status: rdma-core libibverbs/verbs.h (enum ibv_wc_status) and ibv_wc_status_str();
- ncclResult_t: NCCL's src/nccl.h.in (ncclSuccess … ncclInProgress) and ncclGetErrorString().
"""

from __future__ import annotations

import re

# Xid -> (what the catalogue calls it, whether the part is suspect rather than the program)
XID: dict[int, tuple[str, bool]] = {
    8: ("GPU stopped processing (idle timeout)", False),
    13: ("graphics engine exception (usually an illegal access by the program)", False),
    31: ("GPU memory page fault (usually an illegal address in the program)", False),
    32: ("invalid or corrupted push buffer stream", True),
    38: ("driver firmware error", True),
    43: ("GPU stopped processing (the program's channel was reset after its own fault)", False),
    45: ("preemptive cleanup after earlier errors (a process was stopped)", False),
    46: ("GPU stopped processing", True),
    48: ("double-bit ECC error (uncorrectable memory error)", True),
    61: ("internal micro-controller breakpoint/warning", True),
    62: ("internal micro-controller halt", True),
    63: ("ECC page retirement or row remapping recording event", True),
    64: ("ECC page retirement or row remapper recording failure", True),
    68: ("video decoder exception", False),
    69: ("graphics engine class error", False),
    74: ("NVLink error", True),
    79: ("GPU has fallen off the bus", True),
    92: ("high single-bit ECC error rate", True),
    94: ("contained ECC error (the affected program must restart)", True),
    95: ("uncontained ECC error (the GPU must be reset)", True),
    109: ("context switch timeout", False),
    110: ("security fault", True),
    119: ("GSP RPC timeout (the GPU's system processor stopped answering)", True),
    120: ("GSP error (the GPU's system processor failed)", True),
    121: ("C2C link corrected error", True),
    122: ("SPI PMU RPC read failure", True),
    123: ("SPI PMU RPC write failure", True),
    124: ("SPI PMU RPC erase failure", True),
    125: ("InfoROM FS failure", True),
    136: ("GPU recovery action changed", True),
    140: ("unrecovered ECC error", True),
    143: ("GPU initialisation failure", True),
    144: ("NVLink SAW error", True),
    145: ("NVLink RLW error", True),
    146: ("NVLink TLW error", True),
    147: ("NVLink TREX error", True),
    148: ("NVLink NVLPW error", True),
    149: ("NVLink NETIR error", True),
    150: ("NVLink MSE error", True),
    154: ("GPU recovery action changed (reset or reboot needed)", True),
}

# enum ibv_wc_status -> (name, what it means for a training job)
IBV_WC_STATUS: dict[int, tuple[str, str]] = {
    1: ("IBV_WC_LOC_LEN_ERR", "local length error"),
    2: ("IBV_WC_LOC_QP_OP_ERR", "local QP operation error"),
    3: ("IBV_WC_LOC_EEC_OP_ERR", "local EE context operation error"),
    4: (
        "IBV_WC_LOC_PROT_ERR",
        "local protection error: the NIC could not access the registered memory (GPUDirect RDMA / ACS / IOMMU)",
    ),
    5: (
        "IBV_WC_WR_FLUSH_ERR",
        "work request flushed: the queue pair was already in error (a consequence of an earlier error)",
    ),
    6: ("IBV_WC_MW_BIND_ERR", "memory window bind error"),
    7: ("IBV_WC_BAD_RESP_ERR", "bad response"),
    8: ("IBV_WC_LOC_ACCESS_ERR", "local access error"),
    9: ("IBV_WC_REM_INV_REQ_ERR", "remote invalid request"),
    10: ("IBV_WC_REM_ACCESS_ERR", "remote access error"),
    11: ("IBV_WC_REM_OP_ERR", "remote operation error"),
    12: (
        "IBV_WC_RETRY_EXC_ERR",
        "transport retry counter exceeded: the peer did not answer (a link, switch or peer node down)",
    ),
    13: ("IBV_WC_RNR_RETRY_EXC_ERR", "receiver-not-ready retry counter exceeded"),
    14: ("IBV_WC_LOC_RDD_VIOL_ERR", "local RDD violation"),
    15: ("IBV_WC_REM_INV_RD_REQ_ERR", "remote invalid RD request"),
    16: ("IBV_WC_REM_ABORT_ERR", "remote aborted"),
    17: ("IBV_WC_INV_EECN_ERR", "invalid EE context number"),
    18: ("IBV_WC_INV_EEC_STATE_ERR", "invalid EE context state"),
    19: ("IBV_WC_FATAL_ERR", "fatal error"),
    20: ("IBV_WC_RESP_TIMEOUT_ERR", "response timeout"),
    21: ("IBV_WC_GENERAL_ERR", "general error"),
}

# ncclResult_t -> (name, meaning)
NCCL_RESULT: dict[int, tuple[str, str]] = {
    1: ("ncclUnhandledCudaError", "a CUDA call inside NCCL failed"),
    2: ("ncclSystemError", "a system call failed (socket, memory, the network plugin, a device)"),
    3: ("ncclInternalError", "NCCL's internal error"),
    4: ("ncclInvalidArgument", "an invalid argument"),
    5: ("ncclInvalidUsage", "invalid usage (a mismatch between ranks' calls or setup)"),
    6: ("ncclRemoteError", "a remote peer failed or the network between them did"),
    7: ("ncclInProgress", "an operation still in progress"),
}

_XID = re.compile(r"(?i:\bxid\b)(?:\s*\(PCI:([0-9a-fA-F:.]+)\))?\s*[:=]?\s*(?:error\s*)?(\d{1,3})\b")
_XID_NAMED = re.compile(r"\bXid=(\d{1,3})\b")
_PCI = re.compile(
    r"\bPCI:?\s*([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.\d)?|[0-9a-fA-F]{2,4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})"
)
_IB_STATUS = re.compile(r"(?:with (?:status=|error )|status[= ])(\d{1,2})\b")
_TRAIL = re.compile(r"NCCL INFO \S+:\d+ -> (\d)\b")
_NCCL_NAME = re.compile(
    r"\b(nccl(?:UnhandledCudaError|SystemError|InternalError|InvalidArgument|InvalidUsage|RemoteError))\b"
)


def xid(text: str) -> str:
    """`Xid 79: GPU has fallen off the bus (GPU 0000:3b:00)` from a line naming an Xid, or ""."""
    found = _XID_NAMED.search(text) or _XID.search(text)
    if not found:
        return ""
    code = int(found.group(found.lastindex or 1))
    words, hardware = XID.get(code, ("not in the catalogue's common codes: look it up there", True))
    pci = _PCI.search(text)
    where = f" (GPU {pci.group(1)})" if pci else ""
    kind = "a hardware fault" if hardware else "usually the program's own fault"
    return f"Xid {code}: {words}{where}; {kind}"


def xid_is_hardware(text: str) -> bool:
    """The Xid a line names is a hardware fault (True also when the code is unknown or absent)."""
    found = _XID_NAMED.search(text) or _XID.search(text)
    if not found:
        return True
    return XID.get(int(found.group(found.lastindex or 1)), ("", True))[1]


def ib_status(text: str) -> str:
    """`status 12 (IBV_WC_RETRY_EXC_ERR): transport retry counter exceeded…` from an NET/IB completion line."""
    found = _IB_STATUS.search(text)
    if not found:
        return "transport retry counter exceeded" if "retry counter exceeded" in text else ""
    code = int(found.group(1))
    name, words = IBV_WC_STATUS.get(code, (f"status {code}", "unknown work-completion status"))
    return f"status {code} ({name}): {words}"


def nccl_result(text: str) -> str:
    """`ncclRemoteError (6): …` from NCCL's return-code trail (`-> 6`) or a result name in the text."""
    named = _NCCL_NAME.search(text)
    if named:
        for code, (name, words) in NCCL_RESULT.items():
            if name == named.group(1):
                return f"{name} ({code}): {words}"
    found = _TRAIL.search(text)
    if found and int(found.group(1)) in NCCL_RESULT:
        code = int(found.group(1))
        name, words = NCCL_RESULT[code]
        return f"{name} ({code}): {words}"
    return ""


def trail_code(text: str, start: int = 0, limit: int = 4000) -> str:
    """The result name of the first NCCL error-return trail line (`… -> 6`) after offset `start`."""
    found = _TRAIL.search(text, start, start + limit)
    return nccl_result(found.group(0)) if found else ""


DETAILS = {"xid": xid, "ib-status": ib_status, "nccl-result": nccl_result}
