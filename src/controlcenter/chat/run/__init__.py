"""A run: one answer in flight, from its turn's start to its end.

`start` stores the turn's start; `record` is the live handle its loop talks to; `writer`
stores its events behind the live stream; `answer` builds and saves the answer's row from
its events; `commands` are what a user asks of it from any process (a stop, an approval's
answer); `stored` is how readers find it; `runs` holds the runs of a process.
"""
