//go:build unix

package activities

import "syscall"

const noFollow = syscall.O_NOFOLLOW
