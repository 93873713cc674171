#!/usr/bin/env bash
# Regenerates attacks-hosts.hcl from the shipped policies.hcl: the same
# policy with its two login rules limited to login.example.com, laid out by
# `edge fmt` (TestPoliciesAreFormatted checks it). Run from the
# repository's root after changing policies.hcl
# (TestAttacksHostsPolicyIsTheShippedOne fails until then).
set -euo pipefail
out=loadtest/testdata/attacks-hosts.hcl
{
	sed -n '1,/^#       -policy /p' "$out"
	echo '#'
	sed -e 's|^  # hosts *= \(\["login.example.com"\]\)$|  hosts = \1|' \
		-e '/^rule "login-per-network" {$/,/^  paths/ s|^\(  paths *= \["/login"\]\)$|\1\n  hosts = ["login.example.com"]|' \
		policies.hcl
} >"$out.tmp"
go run ./cmd/edge fmt -w "$out.tmp"
mv "$out.tmp" "$out"
