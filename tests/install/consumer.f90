! A Fortran (use mpi_f08) program built against the installed TEMPI (tests/install/run.sh).
program consumer
  use mpi_f08
  implicit none
  integer :: rank, k, buf(8), got(4)
  type(MPI_Datatype) :: every_other
  type(MPI_Request) :: request
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Type_vector(4, 1, 2, MPI_INTEGER, every_other)
  call MPI_Type_commit(every_other)
  buf = [(k, k = 0, 7)]
  if (rank == 0) then
    call MPI_Send(buf, 1, every_other, 1, 0, MPI_COMM_WORLD)
  else if (rank == 1) then
    call MPI_Irecv(got, 4, MPI_INTEGER, 0, 0, MPI_COMM_WORLD, request)
    call MPI_Wait(request, MPI_STATUS_IGNORE)
  end if
  call MPI_Type_free(every_other)
  call MPI_Finalize()
  if (rank == 1) then
    if (any(got /= [0, 2, 4, 6])) then
      print '(a)', 'consumer (Fortran): WRONG'
      error stop 1
    end if
    print '(a)', 'consumer (Fortran): ok'
  end if
end program
