#!/usr/bin/env bash
# Formats the Swift sources in place with the toolchain's swift-format (.swift-format at the root).
set -euo pipefail
cd "$(dirname "$0")/.."
swift format -i -r Sources Tests Package.swift
swift format lint --strict -r Sources Tests Package.swift
