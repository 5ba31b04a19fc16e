// The header self-containment test passes by compiling; running it only confirms the link.
int main() { return 0; }
