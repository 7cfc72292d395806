#!/usr/bin/env bash
# Installs the real analytics clients that Tests/Service/hostile_test.py sends compressed events with: Segment's
# (`segment-analytics-python`, module segment.analytics) and RudderStack's (`rudder-sdk-python`, module
# rudderstack.analytics), and the contract's checkers for Tests/Service/contract_test.py (schemathesis,
# openapi-spec-validator), from PyPI, each only if it is not importable yet. Quiet and idempotent.
set -euo pipefail
PYTHON="${PYTHON:-python3}"
need=()
"$PYTHON" -c 'import segment.analytics' 2>/dev/null || need+=(segment-analytics-python)
"$PYTHON" -c 'import rudderstack.analytics' 2>/dev/null || need+=(rudder-sdk-python)
"$PYTHON" -c 'import schemathesis' 2>/dev/null || need+=(schemathesis)
"$PYTHON" -c 'import openapi_spec_validator' 2>/dev/null || need+=(openapi-spec-validator)
if [ "${#need[@]}" -gt 0 ]; then
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "${need[@]}"
fi
