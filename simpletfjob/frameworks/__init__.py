"""The frameworks a run can be rendered for; TensorFlow is the only one for now."""
