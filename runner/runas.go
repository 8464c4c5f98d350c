package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

// RunAs is the user a host build's shell runs as (SLUICE_EXECUTOR_RUN_AS):
// another uid than the executor's, so a step can read neither the
// executor's environment (/proc/<executor>/environ: its API token) nor its
// 0700 data directory (secret key, outbox, mirrors).
type RunAs struct {
	UID, GID uint32
	// Name is the setting as given, for messages.
	Name string
}

// RunAsRoot is the setting's explicit opt-in to builds running as the
// executor's own user (root): no isolation.
const RunAsRoot = "root"

var reUserName = regexp.MustCompile(`^[a-z_][a-z0-9_.-]{0,31}\$?$`)

// CheckRunAsSyntax checks a SLUICE_EXECUTOR_RUN_AS value without looking
// the user up: "", "root", a user name, or uid[:gid].
func CheckRunAsSyntax(s string) error {
	if s == "" || s == RunAsRoot || reUserName.MatchString(s) {
		return nil
	}
	uid, gid, hasGID := strings.Cut(s, ":")
	if _, err := strconv.ParseUint(uid, 10, 31); err != nil {
		return fmt.Errorf("want a user name or uid[:gid], got %q", s)
	}
	if _, err := strconv.ParseUint(gid, 10, 31); hasGID && err != nil {
		return fmt.Errorf("want a user name or uid[:gid], got %q (bad gid)", s)
	}
	return nil
}

// ParseRunAs resolves a SLUICE_EXECUTOR_RUN_AS value: nil for "" and for
// root (uid 0), else the uid and gid (a user's primary group; a bare uid
// of no known user runs with gid = uid).
func ParseRunAs(s string) (*RunAs, error) {
	if err := CheckRunAsSyntax(s); err != nil {
		return nil, err
	}
	if s == "" || s == RunAsRoot {
		return nil, nil //nolint:nilnil // no switch
	}
	var uid, gid uint64
	if uidS, gidS, hasGID := strings.Cut(s, ":"); isDigits(uidS) {
		uid, _ = strconv.ParseUint(uidS, 10, 31)
		gid = uid
		if hasGID {
			gid, _ = strconv.ParseUint(gidS, 10, 31)
		} else if u, err := user.LookupId(uidS); err == nil {
			if g, err := strconv.ParseUint(u.Gid, 10, 31); err == nil {
				gid = g
			}
		}
	} else {
		u, err := user.Lookup(s)
		if err != nil {
			return nil, fmt.Errorf("no user %q on this machine: %w", s, err)
		}
		uid, _ = strconv.ParseUint(u.Uid, 10, 31)
		gid, _ = strconv.ParseUint(u.Gid, 10, 31)
	}
	if uid == 0 {
		return nil, nil //nolint:nilnil // root: no switch
	}
	return &RunAs{UID: uint32(uid), GID: uint32(gid), Name: s}, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// String names the user for messages.
func (ra *RunAs) String() string {
	return fmt.Sprintf("%s (uid %d, gid %d)", ra.Name, ra.UID, ra.GID)
}

// credential is the shell's credential: the uid and gid, no supplementary
// groups (root's are dropped).
func (ra *RunAs) credential() *syscall.Credential {
	return &syscall.Credential{Uid: ra.UID, Gid: ra.GID, Groups: []uint32{}}
}

// Traversable reports an error naming the first directory on the way to
// dir (dir included) that the user cannot search (execute permission), so
// a build could not reach its workspace there.
func (ra *RunAs) Traversable(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if ok && !ra.may(st, 0o1) {
			return fmt.Errorf("%s (mode %s, owner %d:%d) cannot be entered by %s", p, fi.Mode().Perm(), st.Uid, st.Gid, ra)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// may reports whether the user has permission bit (1 execute, 2 write, 4
// read) on the file.
func (ra *RunAs) may(st *syscall.Stat_t, bit uint32) bool {
	switch {
	case st.Uid == ra.UID:
		return st.Mode&(bit<<6) != 0
	case st.Gid == ra.GID:
		return st.Mode&(bit<<3) != 0
	default:
		return st.Mode&bit != 0
	}
}

// giveTree makes the user own the workspace dir and everything in it,
// without following symbolic links. A regular file with several links is
// left as it is: it is shared with something outside the workspace (a git
// checkout hard-links the mirror's objects, read-only), which the build
// must not own. Children are handed over before their directory: until the
// end every directory on a path is still the executor's, so a process of
// the user (another build) cannot swap a directory for a link to elsewhere
// while the walk is under way.
func (ra *RunAs) giveTree(dir string) error {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err //nolint:wrapcheck // the caller names the workspace
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
				return nil
			}
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return err //nolint:wrapcheck // the caller names the workspace
	}
	for i := len(paths) - 1; i >= 0; i-- {
		// The paths' directories are still the executor's (see above).
		if err := os.Lchown(paths[i], int(ra.UID), int(ra.GID)); err != nil {
			return err //nolint:wrapcheck // the caller names the workspace
		}
	}
	return nil
}

// prepareControlDir lets the user reach the control directory without
// being able to create, rename or remove anything in it: it stays the
// executor's, mode 0710 with the user's group, so the runner's writes there
// can never be redirected by a link the build planted. The files the shell
// writes (its saved environment and working directory) are created for it,
// and so is a home directory.
func (r *run) prepareControlDir() error {
	ra := r.spec.RunAs
	if err := os.Chown(r.ctl, os.Geteuid(), int(ra.GID)); err != nil {
		return fmt.Errorf("control directory: %w", err)
	}
	if err := os.Chmod(r.ctl, 0o710); err != nil { //nolint:gosec // the build's group enters it; it lists and creates nothing
		return fmt.Errorf("control directory: %w", err)
	}
	for _, name := range []string{"env", "cwd"} {
		if err := r.createFor(name); err != nil {
			return err
		}
	}
	home := r.ctlPath("home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return fmt.Errorf("home directory: %w", err)
	}
	if err := os.Chown(home, int(ra.UID), int(ra.GID)); err != nil {
		return fmt.Errorf("home directory: %w", err)
	}
	if err := ra.Traversable(r.ctl); err != nil {
		return fmt.Errorf("control directory: %w", err)
	}
	return nil
}

// createFor creates an empty 0600 file of the control directory owned by
// the user.
func (r *run) createFor(name string) error {
	f, err := os.OpenFile(r.ctlPath(name), os.O_CREATE|os.O_TRUNC|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("control file: %w", err)
	}
	defer func() { _ = f.Close() }()
	if err := f.Chown(int(r.spec.RunAs.UID), int(r.spec.RunAs.GID)); err != nil {
		return fmt.Errorf("control file: %w", err)
	}
	return nil
}

// giveFile makes a file the runner created in the control directory (a step
// script, a FIFO) the user's.
func (r *run) giveFile(path string) error {
	if r.spec.RunAs == nil {
		return nil
	}
	if err := os.Lchown(path, int(r.spec.RunAs.UID), int(r.spec.RunAs.GID)); err != nil {
		return fmt.Errorf("hand %s to %s: %w", filepath.Base(path), r.spec.RunAs, err)
	}
	return nil
}

// errRunAsContainer refuses a RunAs with a container: a container's user is
// the image's business.
var errRunAsContainer = errors.New("Spec.RunAs is for builds on the host, not in a container")
