self_test() { echo "todo"; }
