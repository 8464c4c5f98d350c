package pipeline

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

const paramSpec = sharedHeader + `
parameters:
	car: Audi
	color: [red, blue]
	sports:
		value: [football, basketball]
		description: favourite sports
	region:
		value: eu-west-1
		description: where to deploy
jobs:
	main:
		requires: [~commit]
`

func TestParameterList(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, paramSpec)
	want := []Parameter{
		{Name: "car", Default: "Audi"},
		{Name: "color", Default: "red", Choices: []string{"red", "blue"}},
		{Name: "region", Default: "eu-west-1", Description: "where to deploy"},
		{Name: "sports", Default: "football", Description: "favourite sports", Choices: []string{"football", "basketball"}},
	}
	require.Equal(t, want, spec.ParameterList())
	require.Empty(t, spec.Warnings, "pipeline parameters are acted on")

	// The spec crosses Temporal payloads: the list survives a JSON round trip.
	b, err := json.Marshal(spec)
	require.NoError(t, err)
	var back Spec
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, want, back.ParameterList())
}

func TestResolveParameters(t *testing.T) {
	t.Parallel()
	spec := mustParse(t, paramSpec)

	got, err := spec.ResolveParameters(nil)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"car": "Audi", "color": "red", "region": "eu-west-1", "sports": "football"}, got, "defaults")

	got, err = spec.ResolveParameters(map[string]string{"color": "blue", "car": "any text at all"})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"car": "any text at all", "color": "blue", "region": "eu-west-1", "sports": "football"}, got)
	require.Equal(t, "blue", ParameterEnv(got)["SD_PARAM_COLOR"])

	_, err = spec.ResolveParameters(map[string]string{"color": "green"})
	require.EqualError(t, err, `parameter "color": "green" is not one of the allowed values: "red", "blue"`)

	_, err = spec.ResolveParameters(map[string]string{"colour": "red", "sports": "chess"})
	require.EqualError(t, err, `parameter "colour": not a parameter of the pipeline (it has: car, color, region, sports); parameter "sports": "chess" is not one of the allowed values: "football", "basketball"`)

	_, err = spec.ResolveParameters(map[string]string{"car": "a\x00b"})
	require.EqualError(t, err, `parameter "car": value contains a NUL byte`)

	none := mustParse(t, sharedHeader+"jobs:\n\tmain:\n\t\trequires: [~commit]\n")
	got, err = none.ResolveParameters(nil)
	require.NoError(t, err)
	require.Nil(t, got)
	_, err = none.ResolveParameters(map[string]string{"x": "1"})
	require.EqualError(t, err, `parameter "x": the pipeline's spec declares no parameters`)
}

func TestParameterEnvName(t *testing.T) {
	t.Parallel()
	require.Equal(t, "SD_PARAM_DEPLOY_TARGET", ParamEnvName("deploy-target"))
	require.Equal(t, "SD_PARAM_CAR", ParamEnvName("car"))
}

func TestParametersInvalid(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ block, want string }{
		"bad name":       {"\t\"a b\": x\n", `parameter name "a b" is not allowed`},
		"env collision":  {"\tdeploy-target: x\n\tdeploy_target: y\n", `parameters "deploy-target" and "deploy_target" both become the environment variable SD_PARAM_DEPLOY_TARGET`},
		"empty choices":  {"\tcolor: []\n", `"parameters.color" must list at least one choice`},
		"nested map":     {"\tcolor: {value: {a: b}}\n", `"parameters.color.value" must be a string, a list of strings (the choices) or {value, description}`},
		"missing value":  {"\tcolor: {description: x}\n", `"parameters.color.value" is required`},
		"unknown key":    {"\tcolor: {value: x, default: y}\n", `"parameters.color.default" is not allowed`},
		"list of lists":  {"\tcolor: [[a]]\n", `"parameters.color[0]" must be a string`},
		"description no": {"\tcolor: {value: x, description: [a]}\n", `"parameters.color.description" must be a string`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			msg := parseErr(t, sharedHeader+"parameters:\n"+tc.block+"jobs:\n\tmain:\n\t\trequires: [~commit]\n")
			require.Contains(t, msg, tc.want)
		})
	}
}
