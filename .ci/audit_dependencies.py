"""CI's dependency audit: pip-audit over the virtualenv's packages, its result printed.

Run with the virtualenv's Python (``.venv/bin/python .ci/audit_dependencies.py``); extra
arguments go to pip-audit (e.g. ``--vulnerability-service osv``). Prints every package with a
known vulnerability (id, fixed versions, description), then every package that was *not*
audited and why (pip-audit skips what PyPI does not know, such as this project itself), then
a one-line verdict. Exit status:

0   no known vulnerability in the audited packages;
1   known vulnerabilities (listed), or pip-audit failed for another reason (its error shown);
0   with a loud ``NOT AUDITED`` line when the vulnerability database cannot be reached
    (no network), or when it knew none of the packages (a registry mirror that answers
    "not found" for every package): CI without the database still runs, and its log says
    the audit did not happen.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

# Words of the errors requests/urllib3 raise when the service cannot be reached at all.
UNREACHABLE = (
    "ConnectionError",
    "ConnectTimeout",
    "ReadTimeout",
    "Max retries exceeded",
    "NameResolutionError",
    "Failed to resolve",
    "Temporary failure in name resolution",
    "Connection refused",
    "Network is unreachable",
    "ProxyError",
)


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "audit.json"
        command = [sys.executable, "-m", "pip_audit", "--progress-spinner", "off"]
        command += ["--format", "json", "--output", str(report), "--desc", "on", *argv]
        run = subprocess.run(command, capture_output=True, text=True)
        result = json.loads(report.read_text()) if report.is_file() else None
    if result is None:
        if any(word in run.stderr for word in UNREACHABLE):
            print(run.stderr.strip().splitlines()[-1])  # the error, without its traceback
            print(
                "dependency audit: NOT AUDITED - the vulnerability database could not be "
                "reached (no network?); no package was checked."
            )
            return 0
        print(run.stderr.strip() or run.stdout.strip())
        print(f"dependency audit: FAILED - pip-audit exited with status {run.returncode}.")
        return 1
    return _report(result["dependencies"])


def _report(dependencies: list[dict]) -> int:
    vulnerable = [d for d in dependencies if d.get("vulns")]
    skipped = [d for d in dependencies if "skip_reason" in d]
    audited = len(dependencies) - len(skipped)
    for dependency in vulnerable:
        for vuln in dependency["vulns"]:
            fixed = ", ".join(vuln.get("fix_versions") or []) or "no fixed version"
            aliases = ", ".join(vuln.get("aliases") or [])
            print(
                f"VULNERABLE {dependency['name']} {dependency['version']}: {vuln['id']}"
                f"{f' ({aliases})' if aliases else ''}; fixed in {fixed}"
            )
            if vuln.get("description"):
                print(f"    {' '.join(vuln['description'].split())[:300]}")
    for dependency in skipped:
        print(f"not audited: {dependency['name']}: {dependency['skip_reason']}")
    count = sum(len(d["vulns"]) for d in vulnerable)
    if skipped and not audited:
        print(
            f"dependency audit: NOT AUDITED - the vulnerability database knew none of the "
            f"{len(skipped)} packages (listed above); no package was checked."
        )
        return 0
    if count:
        print(
            f"dependency audit: FAILED - {count} known vulnerabilit"
            f"{'y' if count == 1 else 'ies'} in {len(vulnerable)} of {audited} audited "
            f"packages ({len(skipped)} not audited, listed above)."
        )
        return 1
    print(
        f"dependency audit: passed - no known vulnerability in {audited} audited packages "
        f"({len(skipped)} not audited{', listed above' if skipped else ''})."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
