B
Identity:0J(í½>½Y2>Ó»9>‘_K>xf•>
u>|1>¢i8>õÓJ>oh—>