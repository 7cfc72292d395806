#!/usr/bin/env bash
# Installs the real analytics clients that Tests/Service/hostile_test.py sends compressed events with: Segment's
# (`segment-analytics-python`, module segment.analytics) and RudderStack's (`rudder-sdk-python`, module
# rudderstack.analytics), and the contract's checkers for Tests/Service/contract_test.py (schemathesis,
# openapi-spec-validator), and the APNs double's HTTP/2 server and key checks for Tests/Service/push_test.py
# (hypercorn, h2, cryptography), from PyPI, each only if it is not importable yet. Quiet and idempotent.
set -euo pipefail
PYTHON="${PYTHON:-python3}"
need=()
"$PYTHON" -c 'import segment.analytics' 2>/dev/null || need+=(segment-analytics-python)
"$PYTHON" -c 'import rudderstack.analytics' 2>/dev/null || need+=(rudder-sdk-python)
"$PYTHON" -c 'import schemathesis' 2>/dev/null || need+=(schemathesis)
"$PYTHON" -c 'import openapi_spec_validator' 2>/dev/null || need+=(openapi-spec-validator)
"$PYTHON" -c 'import hypercorn' 2>/dev/null || need+=(hypercorn)
"$PYTHON" -c 'import h2' 2>/dev/null || need+=(h2)
"$PYTHON" -c 'import cryptography' 2>/dev/null || need+=(cryptography)
if [ "${#need[@]}" -gt 0 ]; then
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "${need[@]}"
fi
