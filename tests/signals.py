"""Interrupts where CPython delivers them, for tests that cut code short at every such point: a
signal's exception is raised at a function's start, after a call returns, or after a loop's
jump back, not between any two opcodes."""
import dis

_BREAKERS = ("CALL", "CALL_FUNCTION_EX", "JUMP_BACKWARD")


def _after_breakers(code, cache={}) -> set:
    """Offsets of the instructions that follow one after which CPython checks for signals."""
    if code not in cache:
        ins = list(dis.get_instructions(code))
        cache[code] = {b.offset for a, b in zip(ins, ins[1:]) if a.opname in _BREAKERS}
    return cache[code]


def raising_at(k, filename, skip=lambda frame: False):
    """(a trace function raising KeyboardInterrupt at the k-th such point of the code in
    ``filename``, outside frames ``skip`` names (-1: never), its count of points seen)."""
    count, python_call = [0], set()

    def tracer(frame, event, arg):
        if event == "call" and frame.f_back is not None:
            python_call.add(frame.f_back)   # the caller resumes after it unchecked
        code = frame.f_code
        if code.co_filename != filename or skip(frame):
            return None
        frame.f_trace_opcodes = True
        if event == "opcode":
            if frame.f_lasti not in _after_breakers(code):
                return tracer
            if frame in python_call:        # the call was to Python code: checked at its start
                python_call.discard(frame)
                return tracer
        elif event != "call":
            return tracer
        count[0] += 1
        if count[0] == k:
            raise KeyboardInterrupt
        return tracer

    return tracer, count
