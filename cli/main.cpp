#include <cstdio>
int main() { std::puts("kvcanary"); return 0; }
