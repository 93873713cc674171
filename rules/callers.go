package rules

// KeyTag returns the tag of r's i-th key characteristic
// (CharacteristicType.Tag), which a counter key of r carries in its tag
// byte for i = 0.
func (r *Rule) KeyTag(i int) byte { return r.keyTags[i] }

// KeyShared reports whether r's i-th key characteristic is the same for
// every request (CharacteristicType.Shared: global), so that its value
// may be empty.
func (r *Rule) KeyShared(i int) bool { return r.keyShared[i] }

// folds reports whether r's key folds what req sent into a form other
// callers' values share (CallerCharacteristic.Folds): a success of the
// request then clears no counter of r (reset_on_success).
func (r *Rule) folds(req *Request, s *Scratch) bool {
	for _, ch := range r.Key {
		if cc, ok := ch.(CallerCharacteristic); ok && cc.Folds(req, s) {
			return true
		}
	}
	return false
}
