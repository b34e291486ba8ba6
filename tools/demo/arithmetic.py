"""Worked arithmetic for the demo data: column addition with carries, column subtraction with borrows, long
multiplication by partial products, on integers 0..999. Each function returns (reasoning lines, result).

The steps are uniform on purpose (a carry or borrow of 0 is still written, every column names its digits), so a
small model learns one procedure per operation; tests/demo/data_test.py re-checks every written step.
"""

COLUMNS = ["units", "tens", "hundreds", "thousands", "ten-thousands", "hundred-thousands", "millions"]


def digits_low_first(n, width):
    return [(n // 10 ** i) % 10 for i in range(width)]


def column_add(operands):
    """Lines adding 2 or 3 non-negative operands column by column, and the sum."""
    width = max(len(str(x)) for x in operands)
    cols = [digits_low_first(x, width) for x in operands]
    lines, carry = [], 0
    for i in range(width):
        ds = [c[i] for c in cols]
        s = sum(ds) + carry
        lines.append(f"{COLUMNS[i]}: {' + '.join(map(str, ds))} + {carry} = {s}, write {s % 10}, carry {s // 10}")
        carry = s // 10
    return lines, sum(operands)


def add_steps(a, b):
    lines, s = column_add([a, b])
    return [f"{a} + {b}"] + lines + [f"{a} + {b} = {s}"], s


def column_sub(top, bottom):
    """Lines of top - bottom (top >= bottom) column by column with borrows."""
    width = len(str(top))
    t, u = digits_low_first(top, width), digits_low_first(bottom, width)
    lines, borrow = [], 0
    for i in range(width):
        v = t[i] - u[i] - borrow
        if v >= 0:
            lines.append(f"{COLUMNS[i]}: {t[i]} - {u[i]} - {borrow} = {v}, write {v}, borrow 0")
            borrow = 0
        else:
            lines.append(f"{COLUMNS[i]}: {t[i]} - {u[i]} - {borrow} is negative, "
                         f"1{t[i]} - {u[i]} - {borrow} = {v + 10}, write {v + 10}, borrow 1")
            borrow = 1
    return lines, top - bottom


def sub_steps(a, b):
    if a >= b:
        lines, d = column_sub(a, b)
        return [f"{a} - {b}"] + lines + [f"{a} - {b} = {d}"], d
    lines, d = column_sub(b, a)
    return ([f"{a} - {b}", f"{a} is less than {b}, so {a} - {b} = -({b} - {a})", f"{b} - {a}"] + lines
            + [f"{b} - {a} = {d}", f"{a} - {b} = -{d}"], -d)


def times_digit(a, d):
    """Lines of a * d for one digit d >= 2, digit by digit with carries."""
    lines, carry = [], 0
    for x in digits_low_first(a, len(str(a))):
        v = x * d + carry
        lines.append(f"{x} * {d} + {carry} = {v}, write {v % 10}, carry {v // 10}")
        carry = v // 10
    return lines


def mul_steps(a, b):
    head = [f"{a} * {b}"]
    if a == 0 or b == 0:
        return head + [f"anything times 0 is 0, so {a} * {b} = 0"], 0
    if a < 10 and b < 10:
        return head + [f"{a} * {b} = {a * b}"], a * b
    partials = []
    lines = list(head)
    for place, d in enumerate(digits_low_first(b, len(str(b)))):
        shift = 10 ** place
        factor = d * shift
        if d == 0:
            lines.append(f"{COLUMNS[place]} digit of {b} is 0: {a} * {factor} = 0")
            continue
        lines.append(f"{COLUMNS[place]} digit of {b} is {d}: {a} * {d}")
        if d == 1:
            lines.append(f"{a} * 1 = {a}")
        else:
            lines += times_digit(a, d)
            lines.append(f"{a} * {d} = {a * d}")
        if place > 0:
            lines.append(f"{a} * {factor} = {a * factor}")
        partials.append(a * factor)
    if len(partials) > 1:
        lines.append("add " + " + ".join(map(str, partials)))
        add_lines, _ = column_add(partials)
        lines += add_lines
    lines.append(f"{a} * {b} = {a * b}")
    return lines, a * b


STEPS = {"+": add_steps, "-": sub_steps, "*": mul_steps}
