/* What forker.c allocates, shared with the test that checks it. */
#ifndef ALLOCSCOPE_FORKER_SPEC_H
#define ALLOCSCOPE_FORKER_SPEC_H
#define FORKER_KEPT 200
#define FORKER_KEPT_SIZE 1000
#define FORKER_CHILD 50
#define FORKER_CHILD_SIZE 700
#endif
