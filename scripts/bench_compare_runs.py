"""How scripts/bench-compare.py makes its runs: the variants it compares (each one's environment,
dtype, and whether it trains), run() (one run, reused when its JSON exists, its failure recorded for
the doc, its JSON checked for what it measured) and the counts and failures the doc reports. Shared
with scripts/squad_real.py through bench-compare.py's namespace."""
import json
import os
import shlex
import subprocess
import sys
import time

import openblas_env  # scripts/, beside this file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB = "/usr/lib/x86_64-linux-gnu"
VARIANTS = {  # variant -> the environment its runs get
    "bertbench": {},
    "torch-default": {"LD_LIBRARY_PATH": LIB + "/openblas-pthread"},
    "torch-tuned": {"LD_LIBRARY_PATH": LIB + "/openblas-openmp", "OMP_WAIT_POLICY": "PASSIVE"},
    "ort": {},
    "ort-int8": {},
    "torch-tuned-jit": {"LD_LIBRARY_PATH": LIB + "/openblas-openmp", "OMP_WAIT_POLICY": "PASSIVE"},
    "bertbench-bf16": {},
    "bertbench-int8": {},
    "torch-default-bf16": {"LD_LIBRARY_PATH": LIB + "/openblas-pthread"},
    "torch-tuned-bf16": {"LD_LIBRARY_PATH": LIB + "/openblas-openmp", "OMP_WAIT_POLICY": "PASSIVE"},
}
# Where Debian's OpenBLAS does not know the CPU, the torch peers get its AVX-512 kernels by name
# (OPENBLAS_CORETYPE; scripts/openblas_env.py), as a PyTorch user who noticed would.
VARIANTS = {v: openblas_env.with_core_override(e) for v, e in VARIANTS.items()}
DTYPE_OF = {v: ("bf16" if v.endswith("-bf16") else "int8" if v.endswith("-int8") else "fp32") for v in VARIANTS}
PEERS = ("torch-default", "torch-tuned", "ort", "ort-int8", "torch-tuned-jit")
DEFAULT_PEERS = ("torch-default", "torch-tuned", "ort")  # ort-int8 and torch-tuned-jit run when --peers names them
INFER_ONLY = {"ort", "ort-int8", "torch-tuned-jit"}
NO_BF16 = {"ort", "ort-int8", "torch-tuned-jit"}  # peers without a bf16 variant
BF16_PEERS = ("torch-default-bf16", "torch-tuned-bf16", "ort")  # ort stays fp32: what an ORT user has on a CPU


def variant_runs(v, mode):
    return mode == "infer" or v not in INFER_ONLY


TASK = {"name": "pretraining"}  # set by bench-compare.py's main() from --task


def point_dtype_problem(v, j):
    """Why a run's JSON cannot stand for variant v (a point of another dtype or task), or None."""
    pts = [p for p in (j or {}).get("points", []) if p.get("mode") in ("train", "infer")]
    if not pts:
        return None
    found = pts[0].get("dtype", "fp32")
    if found != DTYPE_OF[v]:
        return "its point reports dtype %r, expected %r" % (found, DTYPE_OF[v])
    task = pts[0].get("task", "pretraining")  # older runs have no task: pretraining
    return None if task == TASK["name"] else "its point reports task %r, expected %r" % (task, TASK["name"])


def log(msg):
    print("[bench-compare %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


COUNTS = {"ran": 0, "reused": 0}
FAILURES = []  # (run's output name, why), for the doc


def describe_exit(rc):
    if rc == -9:
        return "killed by SIGKILL (on this machine: the kernel's out-of-memory killer)"
    return "killed by signal %d" % -rc if rc < 0 else "exit status %d" % rc


def run(cmd, env_extra, out_path, timeout, check=None):
    """Runs cmd unless out_path exists; returns the parsed JSON or None (failure logged and listed
    in the doc). A failure leaves out_path + ".failed", so that a resumed run does not repeat it.
    check(json) -> a reason or None rejects a run that exited cleanly but measured the wrong thing
    (its JSON is kept as out_path + ".rejected")."""
    failed = out_path + ".failed"
    if os.path.exists(out_path) or os.path.exists(failed):
        COUNTS["reused"] += 1
        if os.path.exists(out_path):
            with open(out_path) as f:
                return json.load(f)
        with open(failed) as f:
            FAILURES.append((os.path.basename(out_path), f.read().strip()))
        return None
    COUNTS["ran"] += 1
    env = dict(os.environ)
    for k in ("OMP_WAIT_POLICY", "LD_LIBRARY_PATH", "OMP_NUM_THREADS", "OPENBLAS_CORETYPE"):
        env.pop(k, None)
    env.update(env_extra)
    pretty = " ".join("%s=%s" % kv for kv in env_extra.items()) + (" " if env_extra else "") + " ".join(map(shlex.quote, cmd))
    log("run: " + pretty)
    try:
        r = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout)
        why = None if r.returncode == 0 and os.path.exists(out_path) else describe_exit(r.returncode)
        tail = r.stdout[-2000:]
        last = [l.strip() for l in tail.splitlines() if l.strip()]
        if why and last:  # the program's own last words, e.g. which flag it did not know
            why += ": " + last[-1][:200]
    except subprocess.TimeoutExpired:
        why, tail = "timed out after %d s" % timeout, ""
    j = None
    if not why:
        with open(out_path) as f:
            j = json.load(f)
        why = check(j) if check else None
        if why:
            os.replace(out_path, out_path + ".rejected")
    if why:
        log("FAILED (%s, skipped): %s\n%s" % (why, pretty, tail))
        with open(failed, "w") as f:
            f.write(why + "\n")
        FAILURES.append((os.path.basename(out_path), why))
        return None
    return j


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=60).stdout.strip()
    except Exception as e:  # noqa: BLE001 - report text only
        return "(%s)" % e
