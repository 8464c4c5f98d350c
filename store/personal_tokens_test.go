package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-ci/sluice/store"
)

func TestPersonalTokens(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend) {
		d := b.open(t)
		ctx := t.Context()
		at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
		one := store.PersonalToken{ID: "t1", User: "alice@example.com", Name: "laptop", SHA256: "aa", Groups: []string{"ci-admins"}, CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
		two := store.PersonalToken{ID: "t2", User: "alice@example.com", SHA256: "bb", CreatedAt: at.Add(time.Minute), ExpiresAt: at.Add(time.Hour)}
		bob := store.PersonalToken{ID: "t3", User: "bob@example.com", SHA256: "cc", CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
		for _, tk := range []store.PersonalToken{one, two, bob} {
			require.NoError(t, d.CreatePersonalToken(ctx, tk))
		}
		require.Error(t, d.CreatePersonalToken(ctx, store.PersonalToken{ID: "t4", User: "x", SHA256: "aa", CreatedAt: at, ExpiresAt: at}), "a hash is unique")

		got, found, err := d.PersonalTokenBySHA256(ctx, "aa")
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, one, got)
		_, found, err = d.PersonalTokenBySHA256(ctx, "zz")
		require.NoError(t, err)
		require.False(t, found)

		list, err := d.ListPersonalTokens(ctx, "alice@example.com")
		require.NoError(t, err)
		require.Len(t, list, 2)
		require.Equal(t, []string{"t2", "t1"}, []string{list[0].ID, list[1].ID}, "newest first")
		require.Equal(t, []string{}, list[0].Groups)

		// Only its owner revokes a token; a second revocation keeps the first time.
		ok, err := d.RevokePersonalToken(ctx, "bob@example.com", "t1", at)
		require.NoError(t, err)
		require.False(t, ok)
		ok, err = d.RevokePersonalToken(ctx, "alice@example.com", "t1", at.Add(2*time.Minute))
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = d.RevokePersonalToken(ctx, "alice@example.com", "t1", at.Add(3*time.Minute))
		require.NoError(t, err)
		require.True(t, ok)
		got, _, err = d.PersonalTokenBySHA256(ctx, "aa")
		require.NoError(t, err)
		require.Equal(t, at.Add(2*time.Minute), got.RevokedAt)
		got, _, err = d.PersonalTokenBySHA256(ctx, "bb")
		require.NoError(t, err)
		require.True(t, got.RevokedAt.IsZero())
	})
}
