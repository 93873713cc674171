package rules

import "github.com/hashicorp/hcl/v2"

// The types in this file are the HCL schema of the block rules owns
// (rule), decoded with gohcl; docs/policy.md is the language. Pointers mark optional attributes whose
// absence matters (a default applies). Each *Range field records where an
// attribute's value sits, so compile diagnostics point at it.

// ruleBlock is `rule "NAME" { }`: a limit, a block or a log action.
type ruleBlock struct {
	Name string `hcl:"name,label"`
	// methods, paths and hosts select the requests the rule matches.
	Methods hcl.Expression `hcl:"methods,optional"`
	Paths   hcl.Expression `hcl:"paths,optional"`
	Hosts   hcl.Expression `hcl:"hosts,optional"`
	// key lists the characteristics whose values form the counter's key.
	Key hcl.Expression `hcl:"key,optional"`
	// algorithm is gcra (default), token_bucket, leaky_bucket,
	// fixed_window, sliding_window, sliding_log, or a feature's word
	// (AlgorithmType: concurrency).
	Algorithm *string `hcl:"algorithm,optional"`
	// limit requests per period; burst is the bucket size (default limit).
	Limit  *int64  `hcl:"limit,optional"`
	Period *string `hcl:"period,optional"`
	Burst  *int64  `hcl:"burst,optional"`
	// count is "requests" (default), "attempts" or "failures".
	Count          *string        `hcl:"count,optional"`
	FailureStatus  hcl.Expression `hcl:"failure_status,optional"`
	SuccessStatus  hcl.Expression `hcl:"success_status,optional"`
	ResetOnSuccess *bool          `hcl:"reset_on_success,optional"`
	CountDistinct  *string        `hcl:"count_distinct,optional"`

	// action is "limit" (default), "deny", "log" or "skip" (whose skip
	// list is behaviour/skip's).
	Action          *string    `hcl:"action,optional"`
	When            *whenBlock `hcl:"when,block"`
	Sensitive       *bool      `hcl:"sensitive,optional"`
	OnStoreError    *string    `hcl:"on_store_error,optional"`
	DryRun          *bool      `hcl:"dry_run,optional"`
	IPv4Prefix      *int       `hcl:"ipv4_prefix,optional"`
	IPv6Prefix      *int       `hcl:"ipv6_prefix,optional"`
	IPCeiling       *int64     `hcl:"ip_ceiling,optional"`
	InvalidIdentity *string    `hcl:"invalid_identity,optional"`
	MissingIdentity *string    `hcl:"missing_identity,optional"`
	// max_keys is the rule's own key budget in the memory store (default:
	// an equal share of the store's max_keys; docs/memory-store.md).
	MaxKeys *int `hcl:"max_keys,optional"`
	// network_share is the most of the rule's key budget one client
	// network may hold (default: the memory store's network_share on a
	// sensitive rule, none on an ordinary one; "100%": no bound;
	// rules/network.go).
	NetworkShare *string `hcl:"network_share,optional"`
	// Remain holds the features' attributes and blocks (RuleAttrType,
	// RuleBlockType).
	Remain hcl.Body `hcl:",remain"`
	// body is the block's body as written (Compiler.RuleAttr, DecodeInRule).
	body hcl.Body

	DefRange             hcl.Range `hcl:",def_range"`
	NameRange            hcl.Range `hcl:"name,label_range"`
	AlgorithmRange       hcl.Range `hcl:"algorithm,attr_value_range"`
	LimitRange           hcl.Range `hcl:"limit,attr_value_range"`
	PeriodRange          hcl.Range `hcl:"period,attr_value_range"`
	BurstRange           hcl.Range `hcl:"burst,attr_value_range"`
	CountRange           hcl.Range `hcl:"count,attr_value_range"`
	ResetOnSuccessRange  hcl.Range `hcl:"reset_on_success,attr_value_range"`
	CountDistinctRange   hcl.Range `hcl:"count_distinct,attr_value_range"`
	ActionRange          hcl.Range `hcl:"action,attr_value_range"`
	OnStoreErrorRange    hcl.Range `hcl:"on_store_error,attr_value_range"`
	IPv4PrefixRange      hcl.Range `hcl:"ipv4_prefix,attr_value_range"`
	IPv6PrefixRange      hcl.Range `hcl:"ipv6_prefix,attr_value_range"`
	IPCeilingRange       hcl.Range `hcl:"ip_ceiling,attr_value_range"`
	InvalidIdentityRange hcl.Range `hcl:"invalid_identity,attr_value_range"`
	MissingIdentityRange hcl.Range `hcl:"missing_identity,attr_value_range"`
	MaxKeysRange         hcl.Range `hcl:"max_keys,attr_value_range"`
	NetworkShareRange    hcl.Range `hcl:"network_share,attr_value_range"`
	DryRunRange          hcl.Range `hcl:"dry_run,attr_value_range"`
}

// whenBlock is a rule's `when { }`: conditions that must all hold. Its
// attributes are the features' conditions (ConditionType), decoded one by
// one.
type whenBlock struct {
	Body     hcl.Body  `hcl:",remain"`
	DefRange hcl.Range `hcl:",def_range"`
}
