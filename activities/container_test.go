package activities

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestContainerResources(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, cpu, ram   string
		wantCPUs, wantMe string
		wantErr          string
	}{
		{name: "none"},
		{name: "low", cpu: "LOW", ram: "low", wantCPUs: "2", wantMe: "2048m"},
		{name: "high", cpu: "HIGH", ram: "HIGH", wantCPUs: "6", wantMe: "12288m"},
		{name: "turbo", cpu: "TURBO", ram: "TURBO", wantCPUs: "12", wantMe: "16384m"},
		{name: "numbers", cpu: "1.5", ram: "3", wantCPUs: "1.5", wantMe: "3072m"},
		{name: "bad cpu", cpu: "MEGA", wantErr: "screwdriver.cd/cpu"},
		{name: "negative ram", ram: "-1", wantErr: "screwdriver.cd/ram"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cpus, mem, err := containerResources(tt.cpu, tt.ram)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantCPUs, cpus)
			require.Equal(t, tt.wantMe, mem)
		})
	}
}

func TestSourceDir(t *testing.T) {
	t.Parallel()
	require.Equal(t, "/sd/workspace/src/app", sourceDir("https://github.com/org/app.git"))
	require.Equal(t, "/sd/workspace/src/repo", sourceDir("/tmp/x/repo/"))
	require.Equal(t, "/sd/workspace/src/app", sourceDir("git@github.com:org/app.git"))
}
