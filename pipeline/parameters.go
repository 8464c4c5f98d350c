package pipeline

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// Parameter is one pipeline parameter (the top-level "parameters" block).
// Screwdriver's three shapes are accepted: "name: value", "name: {value,
// description}", and a list value (a list of choices, the first the
// default), also as the object's value.
type Parameter struct {
	Name string `json:"name"`
	// Default is the value an event gets when it does not give one.
	Default string `json:"default"`
	// Description is the parameter's description, as written.
	Description string `json:"description,omitempty"`
	// Choices, when set, are the only values an event may give.
	Choices []string `json:"choices,omitempty"`
}

// ParamEnvPrefix starts the environment variable a build sees for each
// pipeline parameter: SD_PARAM_<NAME>, the name upper-cased with '-' as '_'.
const ParamEnvPrefix = "SD_PARAM_"

// Limits on parameters.
const (
	MaxParameters          = 100
	MaxParameterValueBytes = 4096
)

// reParamName is the rule for parameter names: they become environment
// variable names (SD_PARAM_<NAME>) and meta keys (parameters.NAME.value).
var reParamName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,99}$`)

// ParamEnvName is the environment variable that holds parameter name.
func ParamEnvName(name string) string {
	return ParamEnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// parseParameters validates the top-level parameters block (shapes as in
// Screwdriver's data-schema, names as sluice needs them).
func (p *parser) parseParameters(m *value) {
	if len(m.keys) > MaxParameters {
		p.add("", "parameters", "\"parameters\" can have at most %d parameters (has %d)", MaxParameters, len(m.keys))
	}
	envOf := map[string]string{}
	for i, name := range m.keys {
		field := "parameters." + name
		if !reParamName.MatchString(name) {
			p.add("", field, "parameter name %q is not allowed: names start with a letter or _ and have only letters, digits, _ and - (at most 100 characters), since each becomes the environment variable %s<NAME>", name, ParamEnvPrefix)
			continue
		}
		if other, ok := envOf[ParamEnvName(name)]; ok {
			p.add("", field, "parameters %q and %q both become the environment variable %s; rename one", other, name, ParamEnvName(name))
		}
		envOf[ParamEnvName(name)] = name
		v := m.vals[i]
		if v.kind == kMap {
			hasValue := false
			for ki, k := range v.keys {
				kv := v.vals[ki]
				switch k {
				case "value":
					hasValue = true
					p.paramValue(kv, field+".value")
				case "description":
					if kv.kind != kString {
						p.add("", field+".description", "%q must be a string", field+".description")
					}
				default:
					p.add("", field+"."+k, "%q is not allowed: a parameter object has only \"value\" and \"description\"", field+"."+k)
				}
			}
			if !hasValue {
				p.add("", field+".value", "%q is required", field+".value")
			}
			continue
		}
		p.paramValue(v, field)
	}
}

// paramValue checks one parameter value: a string (or scalar) or a
// non-empty list of them (the choices).
func (p *parser) paramValue(v *value, field string) {
	switch v.kind {
	case kString, kInt, kFloat, kBool:
		if err := checkParamValue(v.jsString()); err != nil {
			p.add("", field, "%q: %v", field, err)
		}
	case kSeq:
		if len(v.items) == 0 {
			p.add("", field, "%q must list at least one choice (the first is the default)", field)
		}
		for i, it := range v.items {
			switch it.kind {
			case kString, kInt, kFloat, kBool:
				if err := checkParamValue(it.jsString()); err != nil {
					p.add("", fmt.Sprintf("%s[%d]", field, i), "\"%s[%d]\": %v", field, i, err)
				}
			default:
				p.add("", fmt.Sprintf("%s[%d]", field, i), "\"%s[%d]\" must be a string", field, i)
			}
		}
	default:
		p.add("", field, "%q must be a string, a list of strings (the choices) or {value, description}", field)
	}
}

// checkParamValue says what is wrong with a parameter value, or nil.
func checkParamValue(s string) error {
	switch {
	case len(s) > MaxParameterValueBytes:
		return fmt.Errorf("value is %d bytes; the limit is %d", len(s), MaxParameterValueBytes)
	case !utf8.ValidString(s):
		return fmt.Errorf("value is not valid UTF-8 text")
	case strings.ContainsRune(s, 0):
		return fmt.Errorf("value contains a NUL byte")
	}
	return nil
}

// paramText is a parameter value as written (after a JSON round trip too).
func paramText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case float64:
		return fmt.Sprint(x)
	default:
		return fmt.Sprint(x)
	}
}

// paramShape reads a value or list value into a default and choices.
func paramShape(v any) (def string, choices []string) {
	switch x := v.(type) {
	case []any:
		for _, it := range x {
			choices = append(choices, paramText(it))
		}
		if len(choices) > 0 {
			def = choices[0]
		}
		return def, choices
	case []string:
		choices = append(choices, x...)
		if len(choices) > 0 {
			def = choices[0]
		}
		return def, choices
	}
	return paramText(v), nil
}

// ParameterList returns the spec's pipeline parameters, sorted by name.
func (s *Spec) ParameterList() []Parameter {
	if len(s.Parameters) == 0 {
		return nil
	}
	out := make([]Parameter, 0, len(s.Parameters))
	// Order-independent: sorted below (workflows call this).
	//workflowcheck:ignore
	for name, raw := range s.Parameters {
		pr := Parameter{Name: name}
		if obj, ok := raw.(map[string]any); ok {
			pr.Default, pr.Choices = paramShape(obj["value"])
			if d, ok := obj["description"].(string); ok {
				pr.Description = d
			}
		} else {
			pr.Default, pr.Choices = paramShape(raw)
		}
		out = append(out, pr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ResolveParameters checks the values an event gives (name to value)
// against the spec's parameters and returns every parameter's value: the
// given one, else the default. A name the spec does not declare, a value
// outside a parameter's choices, or a malformed value is an error naming
// the parameter and what is allowed (all problems at once).
func (s *Spec) ResolveParameters(given map[string]string) (map[string]string, error) {
	params := s.ParameterList()
	byName := make(map[string]Parameter, len(params))
	for _, pr := range params {
		byName[pr.Name] = pr
	}
	var problems []string
	names := make([]string, 0, len(given))
	// Order-independent: sorted below (workflows call this).
	//workflowcheck:ignore
	for n := range given {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v := given[n]
		pr, ok := byName[n]
		switch {
		case !ok && len(params) == 0:
			problems = append(problems, fmt.Sprintf("parameter %q: the pipeline's spec declares no parameters", n))
		case !ok:
			problems = append(problems, fmt.Sprintf("parameter %q: not a parameter of the pipeline (it has: %s)", n, strings.Join(paramNames(params), ", ")))
		case checkParamValue(v) != nil:
			problems = append(problems, fmt.Sprintf("parameter %q: %v", n, checkParamValue(v)))
		case len(pr.Choices) > 0 && !contains(pr.Choices, v):
			problems = append(problems, fmt.Sprintf("parameter %q: %q is not one of the allowed values: %s", n, v, strings.Join(quoteAll(pr.Choices), ", ")))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	if len(params) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(params))
	for _, pr := range params {
		if v, ok := given[pr.Name]; ok {
			out[pr.Name] = v
		} else {
			out[pr.Name] = pr.Default
		}
	}
	return out, nil
}

// ParameterEnv is the environment a build gets for resolved parameters.
func ParameterEnv(resolved map[string]string) map[string]string {
	if len(resolved) == 0 {
		return nil
	}
	out := make(map[string]string, len(resolved))
	for n, v := range resolved {
		out[ParamEnvName(n)] = v
	}
	return out
}

func paramNames(ps []Parameter) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func quoteAll(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
