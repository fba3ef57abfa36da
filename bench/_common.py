"""Shared helpers for the benchmarks: a generator of realistic maintenance-procedure text,
percentiles, peak RSS and the JSON + one-line summary every script prints."""

from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]

EQUIPMENT = [
    ("P", "centrifugal pump"), ("P", "vertical turbine pump"), ("P", "submersible pump"), ("P", "dosing pump"),
    ("V", "butterfly valve"), ("V", "gate valve"), ("V", "pressure reducing valve"), ("V", "check valve"),
    ("C", "air compressor"), ("B", "aeration blower"), ("M", "mixer"), ("CV", "belt conveyor"),
    ("FP", "filter press"), ("VFD", "variable frequency drive"), ("T", "transformer"), ("G", "standby generator"),
    ("CH", "chiller"), ("BL", "boiler"), ("UV", "UV reactor"), ("CL", "chlorinator"), ("SC", "screw conveyor"),
    ("HX", "heat exchanger"), ("AG", "agitator"), ("F", "rapid sand filter"), ("CF", "centrifuge"),
    ("DT", "decanter"), ("HY", "fire hydrant"), ("FM", "flow meter"), ("LT", "level transmitter"), ("CR", "crane"),
]
SITES = ["Northside", "Riverbend", "Lakeview", "Hillcrest", "Eastgate", "Westfield", "Harbour Road", "Millbrook",
         "Oakridge", "Stonebridge", "Cedar Flats", "Kingsmead", "Ashford", "Bramley", "Fairholme", "Glenwood"]
PARTS = ["bearing", "mechanical seal", "impeller", "coupling", "gland packing", "wear ring", "drive belt",
         "diaphragm", "check ball", "stator", "rotor", "shaft sleeve", "gearbox", "oil filter", "air filter",
         "contactor", "fuse", "thermistor", "encoder", "gasket", "O-ring", "actuator", "limit switch", "solenoid"]
LUBES = ["lithium-complex grease NLGI 2", "polyurea grease NLGI 2", "ISO VG 68 turbine oil", "ISO VG 220 gear oil",
         "food-grade H1 grease", "synthetic PAO oil ISO VG 46", "calcium sulfonate grease"]
HAZARDS = ["hydrogen sulfide", "chlorine gas", "stored hydraulic pressure", "rotating shafts", "hot surfaces",
           "arc flash", "confined space atmosphere", "sodium hypochlorite splashes", "falling loads", "noise above 85 dB"]
PPE = ["safety glasses", "face shield", "nitrile gloves", "chemical apron", "hearing protection", "arc-rated clothing",
       "gas detector", "harness and tripod", "steel-toe boots", "respirator with ABEK filter"]
FAULTS = ["overcurrent", "DC bus undervoltage", "motor overtemperature", "ground fault", "phase loss",
          "encoder loss", "overvoltage during deceleration", "communication timeout", "high vibration", "low suction pressure"]
VERBS = ["Inspect", "Check", "Clean", "Replace", "Tighten", "Record", "Measure", "Verify", "Lubricate", "Calibrate",
         "Drain", "Flush", "Isolate", "Test", "Adjust", "Align", "Torque", "Photograph", "Report", "Reset"]
FR = ["Consigner l'équipement avant toute intervention.", "Vérifier l'absence de tension au point de travail.",
      "Noter la date et les heures de marche dans le registre.", "Porter des lunettes de protection et des gants.",
      "Ne jamais graisser un palier pendant la marche.", "Signaler toute fuite au chef de poste."]

TEMPLATES = [
    "Scope. This procedure applies to the {eq} {id} at the {site} station. It covers {part} maintenance and the checks that follow it.",
    "Interval. {verb} the {part} of {id} every {hours:,} operating hours or every {months} months, whichever comes first.",
    "Quantity. Add {grams} g of {lube} to each {part}. Stop as soon as fresh lubricant appears at the relief port.",
    "Torque. Tighten the {part} bolts of {id} in a cross pattern to {nm} N·m, then re-check after {mins} minutes of running.",
    "Safety. Isolate {id} following PROC-LOTO-{loto:02d} before removing any guard. Hazards: {hazard} and {hazard2}.",
    "PPE. Wear {ppe} and {ppe2}. Keep a {ppe3} within reach while working on the {eq}.",
    "Fault code {code} on {id} means {fault}. {verb} the {part} and the supply before resetting; after {n} resets in {mins} minutes, call the electrician on duty.",
    "Acceptance. The vibration on {id} must stay under {vib} mm/s RMS and the bearing temperature under {temp} °C after {mins} minutes.",
    "Spare parts. The {part} for {id} is part number {pn}; the stores at {site} keep {n} in stock. Order from the framework supplier.",
    "Steps. 1. {verb} the {part}. 2. {verb2} the {part2}. 3. {verb3} the readings on the {id} log sheet. 4. Return the permit to the control room.",
    "Records. Log the date, run hours ({hours:,} h at last service), the technician's initials and the quantity used in the CMMS work order {wo}.",
    "Calibration. Calibrate {id} against the reference at {pct} % and {pct2} % of range; the tolerance is ±{tol} %. Replace the {part} if it drifts twice.",
    "Note. {fr}",
    "Permit. Entry near {id} requires a permit when {hazard} exceeds {ppm} ppm; the attendant stays at the hatch at all times.",
    "History. Revision {rev} of this procedure replaced the {months}-month interval with {hours:,} hours after the {site} failure investigation.",
]


def procedure_text(rng: random.Random, paragraphs: int = 6) -> tuple[str, str]:
    """A title and a body of `paragraphs` paragraphs, each from a random template."""
    prefix, eq = rng.choice(EQUIPMENT)
    ident = f"{prefix}-{rng.randint(100, 9999)}"
    site = rng.choice(SITES)
    title = f"{eq.capitalize()} {ident} at {site}: {rng.choice(PARTS)} maintenance (Rev. {rng.randint(1, 9)})"
    paras = []
    # Templates without repeats inside one document (a real procedure has each section once).
    for t in rng.sample(TEMPLATES, min(paragraphs, len(TEMPLATES))):
        paras.append(t.format(
            eq=eq, id=ident, site=site, part=rng.choice(PARTS), part2=rng.choice(PARTS), lube=rng.choice(LUBES),
            hazard=rng.choice(HAZARDS), hazard2=rng.choice(HAZARDS), ppe=rng.choice(PPE), ppe2=rng.choice(PPE),
            ppe3=rng.choice(PPE), verb=rng.choice(VERBS), verb2=rng.choice(VERBS), verb3=rng.choice(VERBS),
            hours=rng.choice([250, 500, 1000, 2000, 4000, 8000]) * rng.randint(1, 3), months=rng.choice([1, 3, 6, 12, 24]),
            grams=rng.randint(5, 60), nm=rng.randint(10, 400), mins=rng.choice([5, 10, 15, 30, 60]), loto=rng.randint(1, 12),
            code=f"E-{rng.randint(1, 99):02d}", fault=rng.choice(FAULTS), n=rng.randint(1, 6), vib=round(rng.uniform(1.8, 7.1), 1),
            temp=rng.randint(60, 95), pn=f"{rng.choice('ABCDEFGHKMNPRST')}{rng.randint(10000, 99999)}-{rng.randint(1, 99):02d}",
            wo=f"WO-{rng.randint(100000, 999999)}", pct=rng.choice([10, 20, 25]), pct2=rng.choice([75, 80, 90]),
            tol=rng.choice([0.5, 1, 2]), fr=rng.choice(FR), ppm=rng.choice([5, 10, 20]), rev=rng.randint(1, 9),
        ))
    return title, "\n\n".join(paras)


QUERIES = [
    "How often should I grease the bearings on pump P-{n}?",
    "What torque for the mechanical seal bolts on the P-{n} pump?",
    "What does fault code E-{e:02d} mean on the drives?",
    "Which PPE do I need to calibrate the dosing pump?",
    "What is the part number of the impeller for P-{n}?",
    "Faut-il consigner la pompe P-{n} avant de changer la garniture ?",
    "What vibration limit applies after replacing a coupling on the blower?",
    "When is a permit required for hydrogen sulfide near the wet well?",
]


def queries(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(QUERIES).format(n=rng.randint(100, 9999), e=rng.randint(1, 99)) for _ in range(n)]


@contextlib.contextmanager
def checkout(ref: str):
    """The tree of git `ref` in a temporary worktree (its path), removed afterwards: a benchmark runs
    the previous version beside this one, on the same machine in the same run."""
    wt = Path(tempfile.mkdtemp(prefix="sg-prev-")) / "tree"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(wt), ref], check=True, capture_output=True)
    try:
        yield wt
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(wt)], capture_output=True)


def pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 2) if values else 0.0


def lat(values_ms: list[float]) -> dict[str, float]:
    return {"p50": pct(values_ms, 50), "p95": pct(values_ms, 95),
            "max": round(max(values_ms), 1) if values_ms else 0.0, "n": len(values_ms)}


def peak_rss_mb() -> float:
    # ru_maxrss is in kilobytes on Linux.
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "loadavg_1m": round(os.getloadavg()[0], 2), "python": sys.version.split()[0]}


def emit(name: str, data: dict[str, Any], line: str) -> None:
    """JSON on stdout (for tooling), then one human line."""
    data = {"bench": name, "machine": machine(), **data}
    print(json.dumps(data, indent=2, ensure_ascii=False))
    print(f"[{name}] {line}")


class Timer:
    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.ms = (time.perf_counter() - self.t0) * 1000
