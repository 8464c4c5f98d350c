//go:build !unix

package activities

const noFollow = 0
