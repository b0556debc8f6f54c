package httpapi

// The daemon's domain types become the API's here, at the edge, and
// nowhere else. Where the layers agree there is one definition (api.Meta
// is collectors.Meta, api.Event is store.Event, ...), and nothing to
// convert.

// nonNil is s, or an empty list for none: the API answers [], not null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
